import type { Send } from './retry.ts';

/** A GET answer kept with its ETag, to answer from when the service says 304 Not Modified. */
export interface CachedAnswer {
  /** The `ETag` the service sent with the answer. */
  etag: string;
  /** The body as the service sent it: JSON text. */
  body: string;
}

/**
 * Where a client keeps the answers of its GETs, by URL (the service's origin, path and query, its
 * parameters sorted), for the `etagCache` option. `get` and `set` may return promises, so a cache may live in a file or a
 * shared store; one that throws fails the call. Keep one per API key: the same URL answers each
 * account with its own records.
 */
export interface EtagCache {
  get(url: string): CachedAnswer | undefined | Promise<CachedAnswer | undefined>;
  set(url: string, answer: CachedAnswer): void | Promise<void>;
}

/** What `etagCache: true` keeps at most. */
const DEFAULT_MAX_BYTES = 8 * 1024 * 1024;

/**
 * The cache of `etagCache: true`: in memory, at most `maxBytes` of URLs, ETags and bodies (UTF-8
 * bytes), the least recently used answers dropped first. An answer larger than that is not kept.
 */
export class MemoryEtagCache implements EtagCache {
  readonly #maxBytes: number;
  /** In order of use, the least recent first. */
  readonly #answers = new Map<string, { answer: CachedAnswer; bytes: number }>();
  #bytes = 0;

  constructor({ maxBytes = DEFAULT_MAX_BYTES }: { maxBytes?: number } = {}) {
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0)
      throw new TypeError(`maxBytes must be a whole number of bytes (got ${String(maxBytes)})`);
    this.#maxBytes = maxBytes;
  }

  /** The bytes of the answers kept now. */
  get bytes(): number {
    return this.#bytes;
  }

  get(url: string): CachedAnswer | undefined {
    const kept = this.#answers.get(url);
    if (kept === undefined) return undefined;
    this.#answers.delete(url);
    this.#answers.set(url, kept);
    return { ...kept.answer };
  }

  set(url: string, answer: CachedAnswer): void {
    this.#drop(url);
    const bytes = Buffer.byteLength(url) + Buffer.byteLength(answer.etag) + Buffer.byteLength(answer.body);
    if (bytes > this.#maxBytes) return;
    this.#answers.set(url, { answer: { etag: answer.etag, body: answer.body }, bytes });
    this.#bytes += bytes;
    for (const oldest of this.#answers.keys()) {
      if (this.#bytes <= this.#maxBytes) break;
      this.#drop(oldest);
    }
  }

  #drop(url: string): void {
    const kept = this.#answers.get(url);
    if (kept === undefined) return;
    this.#answers.delete(url);
    this.#bytes -= kept.bytes;
  }
}

/**
 * `send`, with the ETags of `etagCache`: a GET whose answer is kept goes with `If-None-Match`, and a 304
 * is answered with the kept body (and the 304's own headers: its rate limit and request id); a 200
 * with an ETag is kept. Streamed bodies (exports) are neither kept nor asked for so.
 */
export function caching(send: Send, cache: EtagCache): Send {
  return async (request, exchange) => {
    if (exchange.stream || request.method !== 'GET') return send(request, exchange);
    // Sorted: `{ page, limit }` and `{ limit, page }` ask for the same answer.
    const url = new URL(request.url);
    url.searchParams.sort();
    const key = url.href;
    const kept = await cache.get(key);
    if (kept !== undefined) request.headers.set('if-none-match', kept.etag);
    const response = await send(request, exchange);
    if (response.status === 304 && kept !== undefined) {
      const headers = new Headers(response.headers);
      headers.delete('content-length');
      headers.set('content-type', 'application/json; charset=utf-8');
      return new Response(kept.body, { status: 200, headers });
    }
    const etag = response.headers.get('etag');
    if (response.status === 200 && etag !== null)
      await cache.set(key, { etag, body: await response.clone().text() });
    return response;
  };
}
