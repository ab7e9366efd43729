/**
 * Rows in PostgreSQL's COPY text format, for `COPY … FROM STDIN` (`PostgresStore.copyInQuery`). The format
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

/** The characters COPY TO writes escaped (backslash and a letter), and what each stands for. */
const UNESCAPES: Record<string, string> = {
  '\\': '\\',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
  v: '\v',
};
const ESCAPED = /\\(.)/gs;

/**
 * Rows of COPY's text format as `COPY … TO STDOUT` writes them, split into their fields: the text
 * of each, or null for `\N`. The reverse of `copyText` for text; a caller turns the fields of
 * numeric columns into numbers. COPY TO writes no octal or hex escapes: one met here is refused.
 */
export function parseCopyText(text: string): (string | null)[][] {
  const rows: (string | null)[][] = [];
  let start = 0;
  while (start < text.length) {
    const end = text.indexOf('\n', start);
    if (end === -1) throw new Error('COPY text: the data ended in the middle of a row');
    const fields: (string | null)[] = text.slice(start, end).split('\t');
    for (let i = 0; i < fields.length; i += 1) {
      const field = fields[i] as string;
      if (field === '\\N') fields[i] = null;
      else if (field.includes('\\'))
        fields[i] = field.replace(ESCAPED, (_, c: string) => {
          const character = UNESCAPES[c];
          if (character === undefined)
            throw new Error(`COPY text: an escape COPY TO does not write (\\${c})`);
          return character;
        });
    }
    rows.push(fields);
    start = end + 1;
  }
  return rows;
}
