import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { uncountRequest } from '../../auth/api-keys.ts';

/**
 * Serialized 200 bodies of the public API with their strong ETags, so that a repeated read costs
 * the key check and a map lookup instead of a query and a serialization.
 *
 * Correctness rests on the key: (account, data version, route, normalized parameters). The account
 * keeps one account's body from ever answering another's key; the data version, read with the key
 * on every request and bumped in the same transaction as every import, makes an entry unreachable
 * the moment its data changes. The key check runs before the lookup, on the key and account row as
 * the store holds it at that moment (`KeyLookup`).
 */

interface CachedBody {
  body: Buffer;
  etag: string;
}

/** Bookkeeping bytes of an entry beyond its body and key: map slot, objects, the ETag string. */
const ENTRY_OVERHEAD_BYTES = 256;

/** Least recently used entries go first once the bodies exceed `maxBytes`: memory stays bounded. */
export class ResponseCache {
  private readonly entries = new Map<string, CachedBody>();
  private bytes = 0;

  constructor(private readonly maxBytes: number) {}

  get(key: string): CachedBody | undefined {
    const entry = this.entries.get(key);
    if (entry !== undefined) {
      // Map iteration follows insertion order: re-inserting marks the entry as the newest.
      this.entries.delete(key);
      this.entries.set(key, entry);
    }
    return entry;
  }

  set(key: string, entry: CachedBody): void {
    const size = sizeOf(key, entry);
    // A body this large would evict most of the cache for one response; serve it uncached.
    if (size > this.maxBytes / 8) return;
    const previous = this.entries.get(key);
    if (previous !== undefined) {
      this.entries.delete(key);
      this.bytes -= sizeOf(key, previous);
    }
    this.entries.set(key, entry);
    this.bytes += size;
    for (const [oldestKey, oldest] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.entries.delete(oldestKey);
      this.bytes -= sizeOf(oldestKey, oldest);
    }
  }
}

function sizeOf(key: string, entry: CachedBody): number {
  return entry.body.length + key.length * 2 + ENTRY_OVERHEAD_BYTES;
}

/** A strong validator: the digest of the exact bytes sent, so equal tags mean equal bodies. */
function entityTag(body: Buffer): string {
  return `"${createHash('sha256').update(body).digest('base64url')}"`;
}

const ENTITY_TAG = /(?:W\/)?"([^"]*)"/g;

/**
 * Whether the caller holds this representation: `If-None-Match` lists its tag, compared weakly
 * (RFC 9110 §13.1.2: a `W/` prefix on either side is ignored). `*` is not taken as a match: it
 * would turn any read into a free 304 for a caller that holds nothing, so it is answered like any
 * request, with a 200, and counted.
 */
export function ifNoneMatchMatches(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  const opaque = etag.replace(/^W\//, '');
  for (const match of header.matchAll(ENTITY_TAG)) {
    if (`"${match[1]}"` === opaque) return true;
  }
  return false;
}

export type Respond = (
  request: FastifyRequest,
  reply: FastifyReply,
  variant: string,
  produce: () => Promise<Record<string, unknown>>,
) => Promise<FastifyReply>;

/**
 * The one way public routes answer a 200: from the cache or from `produce` (whose payload goes
 * through the route's 200 schema), with an ETag; an `If-None-Match` naming that tag gets a 304 with
 * no body that does not count against the rate limit. `variant` names the normalized parameters.
 */
export function cachedResponder(cache: ResponseCache): Respond {
  return async (request, reply, variant, produce) => {
    const { account_id: accountId, data_version: dataVersion } = request.apiKey;
    const key = `${accountId}\n${dataVersion}\n${request.routeOptions.url}\n${variant}`;
    let entry = cache.get(key);
    if (entry === undefined) {
      const body = Buffer.from(reply.serializeInput(await produce(), '200') as string);
      entry = { body, etag: entityTag(body) };
      cache.set(key, entry);
    }
    reply.header('etag', entry.etag);
    if (ifNoneMatchMatches(request.headers['if-none-match'], entry.etag)) {
      await uncountRequest(request, reply);
      return reply.code(304).send();
    }
    return reply.header('content-type', 'application/json; charset=utf-8').send(entry.body);
  };
}
