/**
 * Rows in PostgreSQL's COPY text format, for `COPY … FROM STDIN` (`copyInOnPostgres`). The format
 * (https://www.postgresql.org/docs/current/sql-copy.html, "Text Format"): one row per line ending
 * in LF, columns separated by tabs, `\N` for NULL, and in data a backslash escaped as `\\` and the
 * characters that would end a column or a row as `\t`, `\n` and `\r`. Every other character is
 * written as it is, in UTF-8.
 */

/** What a column may hold. */
export type CopyValue = string | number | null | undefined;

/** A character that must be escaped in COPY text. */
const SPECIAL = /[\\\t\n\r]/;
const SPECIALS = /[\\\t\n\r]/g;
const ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };

/** One value as COPY text reads it: `undefined` and `null` are NULL, a number as JavaScript writes it. */
export function copyValue(value: CopyValue): string {
  if (value === null || value === undefined) return '\\N';
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`COPY text: ${value} is not a number PostgreSQL reads`);
    return String(value);
  }
  return SPECIAL.test(value) ? value.replace(SPECIALS, (c) => ESCAPES[c] as string) : value;
}

/** `rows`, their `columns` in that order, as COPY text: what one `COPY … FROM STDIN` reads. */
export function copyText<Row>(rows: readonly Row[], columns: readonly (keyof Row)[]): string {
  let text = '';
  for (const row of rows) {
    for (let i = 0; i < columns.length; i += 1) {
      if (i > 0) text += '\t';
      text += copyValue(row[columns[i] as keyof Row] as CopyValue);
    }
    text += '\n';
  }
  return text;
}
