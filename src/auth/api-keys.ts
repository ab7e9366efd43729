import { hash, randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { KeyForAuth } from '../db/repositories/api-keys.ts';
import { ApiError } from '../errors.ts';
import { soleAuthorization } from './authorization-header.ts';
import { inSpan } from '../telemetry/tracing.ts';
import type { RateLimitWindow } from './rate-limit.ts';

/**
 * The one key-verification path: every public route runs `authenticateApiKey` first, in the
 * order docs/design.md fixes: header → key → plan → scope → rate limit.
 */

export const API_KEY_SCOPES = ['read', 'read-write', 'admin'] as const;
export type ApiKeyScope = (typeof API_KEY_SCOPES)[number];
export type ApiKeyState = 'active' | 'disabled' | 'revoked' | 'expired';

const BEARER_HEADER = /^Bearer (svc_[0-9a-f]{40})$/;
const READ_METHODS = new Set(['GET', 'HEAD']);

// One-shot hashing: runs on every public request, and skips the Hash object of createHash().
export function hashApiKey(rawKey: string): string {
  return hash('sha256', rawKey, 'hex');
}

/** A new raw key from the CSPRNG, its hash for storage and its display prefix. */
export function generateApiKey(): { rawKey: string; keyHash: string; prefix: string } {
  const rawKey = `svc_${randomBytes(20).toString('hex')}`;
  return { rawKey, keyHash: hashApiKey(rawKey), prefix: rawKey.slice(0, 12) };
}

/** The state a person sees: `expired` is derived from the expiry, to the millisecond. */
export function effectiveState(key: { state: string; expires_at: string | null }, now: Date): ApiKeyState {
  if (key.state === 'active' && key.expires_at !== null && Date.parse(key.expires_at) <= now.getTime()) {
    return 'expired';
  }
  return key.state as ApiKeyState;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The verified key and its account; set by `authenticateApiKey` on public routes. */
    apiKey: KeyForAuth;
    /** The allowance window this request was counted in; set by `authenticateApiKey`. */
    rateLimitWindow: RateLimitWindow;
    /**
     * The key the request's answer is counted for in the key's usage (`KeyUsageRecorder`): set as
     * soon as the key is found, so that refusals (an expired key, a 429) are counted too.
     */
    usageKeyId: string | null;
  }
}

export async function authenticateApiKey(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const header = soleAuthorization(request);
  const match = header === undefined ? null : BEARER_HEADER.exec(header);
  if (match === null) throw ApiError.apiKeyRequired();

  const now = new Date();
  const keyHash = hashApiKey(match[1] as string);
  const { key, window } =
    (await countRemembered(request, keyHash, now)) ?? (await lookUpAndCount(request, keyHash, now));
  request.usageKeyId = key.id;
  if (!window.allowed) throw ApiError.rateLimitExceeded(key.rate_limit_per_hour, window.retryAfterSeconds);
  reply
    .header('x-ratelimit-limit', key.rate_limit_per_hour)
    .header('x-ratelimit-remaining', window.remaining)
    .header('x-ratelimit-reset', window.resetEpochSeconds);

  request.server.lastUse.record(key.id, now);
  request.apiKey = key;
  request.rateLimitWindow = window;
}

/** The checks before the count, in docs/design.md's order: key, plan, scope. */
function refusal(key: KeyForAuth | undefined, method: string, now: Date): ApiError | null {
  if (key === undefined || effectiveState(key, now) !== 'active') return ApiError.apiKeyInvalid();
  if (key.api_access !== 1) return ApiError.featureNotAvailable();
  if (!READ_METHODS.has(method) && key.scope === 'read') return ApiError.insufficientScope(method, key.scope);
  return null;
}

/** The key row as the store holds it now, checked, then counted: the order docs/design.md fixes. */
async function lookUpAndCount(request: FastifyRequest, keyHash: string, now: Date) {
  // The span (with tracing on) holds the key row's lookup: its cache, or the store's query.
  const key = await inSpan(
    'api_key.check',
    {
      attributes: { 'api_key.source': 'lookup' },
      describe: (row) => ({ 'api_key.found': row !== undefined }),
    },
    () => request.server.keyLookup.findByHash(keyHash, now.getTime()),
  );
  if (key !== undefined) request.usageKeyId = key.id;
  const refused = refusal(key, request.method, now);
  // (`refusal` refuses a missing key; the second test is there for the type checker.)
  if (refused !== null || key === undefined) throw refused ?? ApiError.apiKeyInvalid();
  return { key, window: await countRequest(request, key) };
}

/** The rate limiter's count of this request (a span of its own with tracing on). */
function countRequest(request: FastifyRequest, key: KeyForAuth): Promise<RateLimitWindow> {
  return inSpan(
    'rate_limit.decision',
    {
      describe: (window) => ({
        'rate_limit.allowed': window.allowed,
        'rate_limit.remaining': window.remaining,
      }),
    },
    () => request.server.rateLimiter.consume(key.id, key.rate_limit_per_hour),
  );
}

/**
 * One Redis round trip instead of two, where the count reads the shared generation (PostgreSQL with
 * Redis): a row read earlier that would pass the checks is counted at once, and the generation the
 * count returns says whether the row may be served. If it may not (a writer bumped it since, or it
 * could not be read), the count is given back and the request starts over from the store, so it
 * gets exactly the answer and the count it would have got without this path. A row past its age
 * (`KEY_ROW_MAX_AGE_MS`) is not taken, whatever the generation. `undefined` when the path does not
 * apply.
 */
async function countRemembered(request: FastifyRequest, keyHash: string, now: Date) {
  const { keyLookup, rateLimiter } = request.server;
  if (!rateLimiter.readsGeneration) return undefined;
  const remembered = inSpan(
    'api_key.check',
    {
      attributes: { 'api_key.source': 'memory' },
      describe: (row) => ({ 'api_key.found': row !== undefined }),
    },
    () => keyLookup.remembered(keyHash, now.getTime()),
  );
  if (remembered === undefined || refusal(remembered.row, request.method, now) !== null) return undefined;
  const key = remembered.row;
  const epoch = keyLookup.epoch;
  const window = await countRequest(request, key);
  // The epoch: the connection may have closed while the count waited, and the count been answered
  // by a Redis that lacks the last bumps (`KeyLookup.forgetAll`).
  if (window.generation === remembered.generation && keyLookup.epoch === epoch) return { key, window };
  // A refused count was not kept (`consume` gave it back), so there is nothing to give back then.
  if (window.allowed) await rateLimiter.refund(key.id, window);
  return undefined;
}

/**
 * Takes back the count of a request that turned out not to count (a 304: the caller already holds
 * the representation), in the window it was counted in, and reports the allowance as it now stands.
 */
export async function uncountRequest(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const key = request.apiKey;
  if (!(await request.server.rateLimiter.refund(key.id, request.rateLimitWindow))) return;
  const remaining = Number(reply.getHeader('x-ratelimit-remaining'));
  reply.header('x-ratelimit-remaining', Math.min(remaining + 1, key.rate_limit_per_hour));
}
