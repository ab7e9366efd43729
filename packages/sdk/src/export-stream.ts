import type { RateLimit } from './types.ts';

/** NDJSON, one row a line, each line as it arrives: the body is never held whole. */
async function* ndjsonRows<Row>(body: ReadableStream<Uint8Array>): AsyncGenerator<Row> {
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
  if (partial !== '') throw new Error('the export ended mid-row: it was cut short, export again');
}

/**
 * The rows of an export, in the list endpoint's order, read as they arrive. Iterate it once (a
 * second loop throws), to the end, or `cancel()` it: the service holds the export's snapshot until then. Leaving a `for await`
 * loop early cancels it too.
 */
export class ExportStream<Row> implements AsyncIterable<Row> {
  /** `X-Changes-Cursor`: the feed position of the snapshot, to continue with the changes feed. */
  readonly cursor: string;
  readonly rateLimit: RateLimit | null;
  readonly requestId: string | null;
  readonly #body: ReadableStream<Uint8Array>;
  readonly #rows: AsyncGenerator<Row>;
  #iterated = false;

  constructor(
    body: ReadableStream<Uint8Array>,
    meta: { cursor: string; rateLimit: RateLimit | null; requestId: string | null },
  ) {
    this.cursor = meta.cursor;
    this.rateLimit = meta.rateLimit;
    this.requestId = meta.requestId;
    this.#body = body;
    this.#rows = ndjsonRows(body);
  }

  /** The rows, once: a second loop over the same export throws rather than yield nothing. */
  [Symbol.asyncIterator](): AsyncGenerator<Row> {
    if (this.#iterated)
      throw new Error('this export was read already: an export is read once; export again for another pass');
    this.#iterated = true;
    return this.#rows;
  }

  /** Stops reading, which releases the snapshot on the service. */
  async cancel(): Promise<void> {
    await this.#rows.return(undefined);
    // Once reading began, ending the rows cancelled the body; else nothing has touched it.
    if (!this.#body.locked) await this.#body.cancel();
  }
}
