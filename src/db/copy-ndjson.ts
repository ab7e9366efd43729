/**
 * PostgreSQL's `COPY … TO STDOUT` text format turned into NDJSON, byte by byte: the lines that
 * `JSON.stringify` writes for objects with the given fields in the given order, without a string
 * or an object per row (docs/performance.md, "PostgreSQL reads").
 *
 * The text format (https://www.postgresql.org/docs/current/sql-copy.html, "Text Format"): one row
 * per line ending in LF, columns separated by tabs, `\N` for NULL, and in data a backslash escapes
 * itself and the control characters BS, FF, LF, CR, TAB and VT (`\\`, `\b`, `\f`, `\n`, `\r`,
 * `\t`, `\v`). COPY TO writes every other byte as it is (it emits no octal or hex escapes), in the
 * client encoding, UTF-8 here.
 *
 * JSON.stringify escapes `"`, `\` and every control character below U+0020 (BS, FF, LF, CR and TAB
 * by their short escapes, the others as `\u00xx`, lowercase) and nothing else; text from
 * PostgreSQL is valid UTF-8, so it holds no lone surrogate for it to escape either.
 */

/** How a column is written: a JSON string, or a number written as PostgreSQL wrote it. */
export type JsonKind = 'string' | 'number';

export interface JsonField {
  name: string;
  kind: JsonKind;
}

/** A COPY column as a line writes it: the bytes before its value, and its kind. */
export interface CopyColumn {
  before: string;
  kind: JsonKind;
}

/** The columns of an object's fields, in order: `{"id":` before the first, `,"name":` before the others. */
export const objectColumns = (fields: readonly JsonField[]): CopyColumn[] =>
  fields.map(({ name, kind }, i) => ({ before: `${i === 0 ? '{' : ','}${JSON.stringify(name)}:`, kind }));

const TAB = 0x09;
const LF = 0x0a;
const BACKSLASH = 0x5c;
const QUOTE = 0x22;
const N = 0x4e;
const HEX = Buffer.from('0123456789abcdef');
const NULL = Buffer.from('null');
const UNICODE_ESCAPE = Buffer.from('\\u00');
const NOTHING = Buffer.alloc(0);

/** COPY's escape letters, and what JSON writes after its backslash for the same character. */
const ESCAPED: Record<number, string> = {
  [BACKSLASH]: '\\',
  0x62: 'b',
  0x66: 'f',
  0x6e: 'n',
  0x72: 'r',
  0x74: 't',
  0x76: 'u000b',
};
const JSON_ESCAPE_OF: (Buffer | undefined)[] = Array.from({ length: 128 }, (_, byte) => {
  const escape = ESCAPED[byte];
  return escape === undefined ? undefined : Buffer.from(`\\${escape}`);
});

/** The most bytes one byte of COPY text becomes: a control character as `\u00xx`. */
const MOST_PER_BYTE = 6;

/**
 * Each row becomes one line: per column, its `before` bytes and its value, then `close` and LF.
 * An object's line is `objectColumns(fields)` closed by `}`; other shapes (an object inside an
 * envelope, as the changes feed writes its changes) put their own bytes around the values.
 */
export class CopyToNdjson {
  private readonly prefixes: Buffer[];
  private readonly strings: boolean[];
  private readonly close: Buffer;
  /** The bytes a row adds beyond its own, at most: the prefixes, `null`s, the close and LF. */
  private readonly rowOverhead: number;
  /** The start of a row that the last chunk ended in the middle of. */
  private rest: Buffer = NOTHING;
  /**
   * Bytes of NDJSON per byte of COPY text in the last chunk, for the size of the next chunk's
   * buffer. Field names make a line about twice its COPY row: an estimate too small would mean a
   * larger buffer and a copy into it, once per chunk.
   */
  private expansion = 2;
  /** The lines of the chunk being pushed, and how many of its bytes are written. */
  private out: Buffer = NOTHING;
  private used = 0;

  constructor(columns: readonly CopyColumn[], close = '}') {
    if (columns.length === 0) throw new Error('COPY to NDJSON: no columns');
    this.prefixes = columns.map(({ before }) => Buffer.from(before));
    this.strings = columns.map(({ kind }) => kind === 'string');
    this.close = Buffer.from(`${close}\n`);
    this.rowOverhead = this.prefixes.reduce((sum, prefix) => sum + prefix.length + 4, this.close.length);
  }

  /**
   * The lines of the rows that `chunk` completes; a row it leaves unfinished waits for the next one.
   * Only the row that spans two chunks is copied before it is read: the rest is read in place.
   */
  push(chunk: Buffer): Buffer {
    const end = chunk.lastIndexOf(LF) + 1;
    if (end === 0) {
      this.rest = this.rest.length === 0 ? chunk : Buffer.concat([this.rest, chunk]);
      return NOTHING;
    }
    const text = this.rest.length + end;
    this.out = Buffer.allocUnsafe(Math.ceil(text * this.expansion * 1.1) + this.rowOverhead * 8);
    this.used = 0;
    let start = 0;
    if (this.rest.length > 0) {
      start = chunk.indexOf(LF) + 1;
      const spanning = Buffer.concat([this.rest, chunk.subarray(0, start)]);
      this.rows(spanning, 0, spanning.length);
    }
    this.rows(chunk, start, end);
    this.rest = chunk.subarray(end);
    this.expansion = this.used / text;
    const lines = this.out.subarray(0, this.used);
    this.out = NOTHING;
    return lines;
  }

  /** Writes the lines of the whole rows in `input[start, end)` after those already in `out`. */
  private rows(input: Buffer, start: number, end: number): void {
    while (start < end) {
      const rowEnd = input.indexOf(LF, start);
      const most = (rowEnd - start) * MOST_PER_BYTE + this.rowOverhead;
      if (this.out.length - this.used < most) {
        const larger = Buffer.allocUnsafe(Math.max(this.out.length * 2, this.used + most));
        this.out.copy(larger, 0, 0, this.used);
        this.out = larger;
      }
      this.used = this.row(input, start, rowEnd, this.out, this.used);
      start = rowEnd + 1;
    }
  }

  /** At the end of the data: a row left unfinished means the data was cut short. */
  end(): void {
    if (this.rest.length > 0) throw new Error('COPY to NDJSON: the data ended in the middle of a row');
  }

  /** Writes the line of the row in `input[start, rowEnd)` at `out[o]`; returns where it ends. */
  private row(input: Buffer, start: number, rowEnd: number, out: Buffer, o: number): number {
    let i = start;
    const last = this.prefixes.length - 1;
    for (let field = 0; field <= last; field += 1) {
      o = put(this.prefixes[field] as Buffer, out, o);
      // Each writer reads its field up to the tab that ends it, or to the row's end, and says
      // where that was (`fieldEnd`): one pass over the bytes, no search ahead of it.
      if (input[i] === BACKSLASH && input[i + 1] === N && (i + 2 === rowEnd || input[i + 2] === TAB)) {
        o = put(NULL, out, o);
        this.fieldEnd = i + 2;
      } else if (this.strings[field] === true) o = this.stringValue(input, i, rowEnd, out, o);
      else o = this.numberValue(input, i, rowEnd, out, o);
      // Data holds no tab (COPY writes it as `\t`): a tab ends a field, a row has one fewer than fields.
      if ((field === last) !== (this.fieldEnd === rowEnd)) {
        throw new Error(`COPY to NDJSON: a row does not have ${last + 1} columns`);
      }
      i = this.fieldEnd + 1;
    }
    return put(this.close, out, o);
  }

  /** Where the field last written ended: at its tab, or at the row's end. */
  private fieldEnd = 0;

  /** The JSON string of the COPY text of the field at `input[i]`, at `out[o]`; returns where it ends. */
  private stringValue(input: Buffer, i: number, rowEnd: number, out: Buffer, o: number): number {
    out[o++] = QUOTE;
    while (i < rowEnd) {
      const byte = input[i] as number;
      if (byte === TAB) break;
      i += 1;
      if (byte === BACKSLASH) {
        const escape = JSON_ESCAPE_OF[input[i++] as number];
        if (escape === undefined) throw new Error('COPY to NDJSON: an escape that COPY TO does not write');
        o = put(escape, out, o);
      } else if (byte === QUOTE) {
        out[o++] = BACKSLASH;
        out[o++] = QUOTE;
      } else if (byte < 0x20) {
        // A control character COPY leaves as it is (it escapes only BS, FF, LF, CR, TAB and VT).
        o = put(UNICODE_ESCAPE, out, o);
        out[o++] = HEX[byte >> 4] as number;
        out[o++] = HEX[byte & 0x0f] as number;
      } else {
        out[o++] = byte;
      }
    }
    out[o++] = QUOTE;
    this.fieldEnd = i;
    return o;
  }

  /** The number PostgreSQL wrote in the field at `input[i]`, at `out[o]`; returns where it ends. */
  private numberValue(input: Buffer, i: number, rowEnd: number, out: Buffer, o: number): number {
    while (i < rowEnd) {
      const byte = input[i] as number;
      if (byte === TAB) break;
      out[o++] = byte;
      i += 1;
    }
    this.fieldEnd = i;
    return o;
  }
}

/**
 * Copies a few bytes (what comes before a field, an escape) at `out[o]`; returns where they end.
 * A loop in JavaScript: for so few bytes, cheaper than a call into Buffer's native copy.
 */
function put(bytes: Uint8Array, out: Buffer, o: number): number {
  for (let i = 0; i < bytes.length; i += 1) out[o++] = bytes[i] as number;
  return o;
}
