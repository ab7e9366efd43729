import { createHash } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { uncountRequest } from '../../auth/api-keys.ts';
import { Lru } from '../../lib/lru.ts';

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

function sizeOf(entry: CachedBody, key: string): number {
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
) => void;

/** A route file of the public API: its GET routes, answering through `respond`. */
export type PublicRoutes = FastifyPluginAsyncTypebox<{ respond: Respond }>;

/**
 * The one way public routes answer a 200: from a cache of at most `maxBytes` or from `produce`
 * (whose payload goes through the route's 200 schema), with an ETag; an `If-None-Match` naming that tag gets a 304 with
 * no body that does not count against the rate limit. `variant` names the normalized parameters.
 *
 * It sends the reply itself, failures included, and returns nothing: Fastify does not wait on a
 * handler that returns nothing, so a cached body is sent without a promise, and a route's return
 * type stays the payload its response schema describes rather than the reply object.
 */
export function cachedResponder(maxBytes: number): Respond {
  // Least recently used bodies go first once they exceed `maxBytes`: memory stays bounded.
  const cache = new Lru<string, CachedBody>(maxBytes, sizeOf);
  // A body larger than this would evict most of the cache for one response; it is served uncached.
  const largestCached = maxBytes / 8;
  return (request, reply, variant, produce) => {
    // An account's answers change only with its feed position (`data_version`), within one
    // incarnation of the account (its `created_at`: an id erased and imported again counts its
    // feed from 0 again).
    const {
      account_id: accountId,
      account_created_at: incarnation,
      data_version: dataVersion,
    } = request.apiKey;
    const key = `${accountId}\n${incarnation}\n${dataVersion}\n${request.routeOptions.url}\n${variant}`;
    const cached = cache.get(key);
    if (cached !== undefined) {
      sendBody(request, reply, cached);
      return;
    }
    produce()
      .then((payload) => {
        const body = Buffer.from(String(reply.serializeInput(payload, '200')));
        const entry = { body, etag: entityTag(body) };
        if (sizeOf(entry, key) <= largestCached) cache.set(key, entry);
        sendBody(request, reply, entry);
      })
      .catch((error: unknown) => reply.send(error));
  };
}

function sendBody(request: FastifyRequest, reply: FastifyReply, entry: CachedBody): void {
  reply.header('etag', entry.etag);
  if (ifNoneMatchMatches(request.headers['if-none-match'], entry.etag)) {
    uncountRequest(request, reply).then(
      () => reply.code(304).send(),
      (error: unknown) => reply.send(error),
    );
    return;
  }
  reply.header('content-type', 'application/json; charset=utf-8').send(entry.body);
}
