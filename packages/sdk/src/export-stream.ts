import type { RateLimit } from './types.ts';

/** The formats of an export: NDJSON (typed records) or CSV (for spreadsheets). */
export type ExportFormat = 'ndjson' | 'csv';

/**
 * A row of a CSV export: each field under its column's name, as text as the file holds it. An
 * empty field is `''` (a null too); a number is its digits; a text field that begins with `=`, `+`,
 * `-`, `@`, a tab or a CR carries the leading `'` the service adds so that spreadsheets do not run it
 * as a formula. For the values as the API types them, export NDJSON.
 */
export type CsvRecord = Record<string, string>;

const ENDED_MID_ROW = 'the export ended mid-row: it was cut short, export again';

/** NDJSON, one row a line, each line as it arrives: the body is never held whole. */
export async function* ndjsonRows<Row>(body: ReadableStream<Uint8Array>): AsyncGenerator<Row> {
  const decoder = new TextDecoder();
  let partial = '';
  for await (const bytes of body) {
    // `stream`: a character split between two chunks is decoded with the second.
    const lines = (partial + decoder.decode(bytes, { stream: true })).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) yield JSON.parse(line);
  }
  partial += decoder.decode();
  // Every row ends in LF: a body that stops mid-line was cut short (the service failed mid-export).
  if (partial !== '') throw new Error(ENDED_MID_ROW);
}

const QUOTE = 0x22;
const COMMA = 0x2c;
const CR = 0x0d;
const LF = 0x0a;

/**
 * RFC 4180 records from text that arrives in pieces: fields split by commas, records ended by CRLF
 * (a bare LF too), a quoted field holding commas, line breaks and doubled quotes.
 */
class CsvRecords {
  #record: string[] = [];
  #field = '';
  /** Inside a quoted field. */
  #quoted = false;
  /** A quote inside a quoted field, at the end of a piece: it ends the field or doubles a quote. */
  #quotePending = false;
  /** Anything read since the last record ended. */
  #started = false;

  /** The records that `text` completes. */
  push(text: string): string[][] {
    const records: string[][] = [];
    let from = 0;
    for (let i = 0; i < text.length; i += 1) {
      const char = text.charCodeAt(i);
      this.#started = true;
      if (this.#quotePending) {
        this.#quotePending = false;
        if (char === QUOTE) {
          // A doubled quote: one quote of the field's text.
          from = i;
          continue;
        }
        this.#quoted = false;
        from = i;
      }
      if (this.#quoted) {
        if (char === QUOTE) {
          this.#field += text.slice(from, i);
          this.#quotePending = true;
        }
        continue;
      }
      if (char === QUOTE && this.#field === '' && from === i) {
        this.#quoted = true;
        from = i + 1;
      } else if (char === COMMA) {
        this.#record.push(this.#field + text.slice(from, i));
        this.#field = '';
        from = i + 1;
      } else if (char === CR) {
        this.#field += text.slice(from, i);
        from = i + 1;
      } else if (char === LF) {
        this.#record.push(this.#field + text.slice(from, i));
        records.push(this.#record);
        this.#record = [];
        this.#field = '';
        this.#started = false;
        from = i + 1;
      }
    }
    if (!this.#quotePending) this.#field += text.slice(from);
    return records;
  }

  /** At the end of the text: throws if it stopped inside a record. */
  end(): void {
    if (this.#started) throw new Error(ENDED_MID_ROW);
  }
}

/** CSV rows as records under the header row's names, as they arrive. */
export async function* csvRows(body: ReadableStream<Uint8Array>): AsyncGenerator<CsvRecord> {
  const decoder = new TextDecoder();
  const parser = new CsvRecords();
  let header: string[] | null = null;
  const row = (fields: string[]): CsvRecord => {
    if (header === null) throw new Error('the export has no header row');
    if (fields.length !== header.length)
      throw new Error(`a row of the CSV export has ${fields.length} fields, its header ${header.length}`);
    return Object.fromEntries(header.map((name, i) => [name, fields[i] ?? '']));
  };
  for await (const bytes of body) {
    for (const fields of parser.push(decoder.decode(bytes, { stream: true }))) {
      if (header === null) header = fields;
      else yield row(fields);
    }
  }
  for (const fields of parser.push(decoder.decode())) {
    if (header === null) header = fields;
    else yield row(fields);
  }
  parser.end();
}

/**
 * The rows of an export, in the list endpoint's order, read as they arrive; or its bytes, as
 * `body`. Read it once, one way or the other: a second loop, or a loop after `body` was taken,
 * throws. Iterate it to the end, or `cancel()` it: the service holds the export's snapshot until
 * then. Leaving a `for await` loop early cancels it too.
 */
export class ExportStream<Row> implements AsyncIterable<Row> {
  /** `X-Changes-Cursor`: the feed position of the snapshot, to continue with the changes feed. */
  readonly cursor: string;
  readonly rateLimit: RateLimit | null;
  readonly requestId: string | null;
  readonly #body: ReadableStream<Uint8Array>;
  readonly #rows: AsyncGenerator<Row>;
  /** How the export was read: not yet, as rows, or as bytes (`body`). */
  #read: 'no' | 'rows' | 'body' = 'no';

  /** `rows` reads the body's format: `ndjsonRows` (the default) or `csvRows`. */
  constructor(
    body: ReadableStream<Uint8Array>,
    meta: { cursor: string; rateLimit: RateLimit | null; requestId: string | null },
    rows: (body: ReadableStream<Uint8Array>) => AsyncGenerator<Row> = ndjsonRows,
  ) {
    this.cursor = meta.cursor;
    this.rateLimit = meta.rateLimit;
    this.requestId = meta.requestId;
    this.#body = body;
    this.#rows = rows(body);
  }

  /**
   * The bytes of the export as they arrive (decompressed), to write to a file without parsing, e.g.
   * `await writeFile('incidents.csv', exported.body)`. Taking it means reading the export this way:
   * the rows can no longer be iterated. Throws once the rows are being read.
   */
  get body(): ReadableStream<Uint8Array> {
    if (this.#read === 'rows')
      throw new Error(
        'this export is being read as rows: its body is no longer whole; export again for the bytes',
      );
    this.#read = 'body';
    return this.#body;
  }

  /** The rows, once: a second loop over the same export, or one after `body`, throws. */
  [Symbol.asyncIterator](): AsyncGenerator<Row> {
    if (this.#read === 'body')
      throw new Error('this export is read as bytes (its body was taken): export again to iterate its rows');
    if (this.#read === 'rows')
      throw new Error('this export was read already: an export is read once; export again for another pass');
    this.#read = 'rows';
    return this.#rows;
  }

  /** Stops reading, which releases the snapshot on the service. */
  async cancel(): Promise<void> {
    await this.#rows.return(undefined);
    // Once reading began, ending the rows cancelled the body; else nothing has touched it. A body
    // taken and being read (locked) is cancelled by its reader.
    if (!this.#body.locked) await this.#body.cancel();
  }
}
