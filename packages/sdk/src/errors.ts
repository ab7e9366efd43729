import type { RateLimit } from './types.js';

/** The codes the contract puts in `error` (401, 403, 429, and the changes feed's 400 and 410). */
export type ErrorCode =
  | 'API_KEY_REQUIRED'
  | 'API_KEY_INVALID'
  | 'INSUFFICIENT_SCOPE'
  | 'FEATURE_NOT_AVAILABLE'
  | 'RATE_LIMIT_EXCEEDED'
  | 'INVALID_CURSOR'
  | 'CURSOR_EXPIRED'
  // A code this version of the SDK does not know yet, still reported as it came.
  | (string & {});

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Any answer but a 2xx. `code` is the contract's `error` string, or null when the body has
 * `"error": true` (404, 405, 500, 503) or is not the API's JSON (a proxy's page).
 */
export class SafetyApiError extends Error {
  override readonly name = 'SafetyApiError';
  readonly status: number;
  readonly code: ErrorCode | null;
  readonly requestId: string | null;
  /** `Retry-After` in seconds, on a 429 or 503 the client gave up waiting for. */
  readonly retryAfter: number | null;
  readonly rateLimit: RateLimit | null;

  constructor(
    status: number,
    body: unknown,
    meta: { requestId: string | null; retryAfter: number | null; rateLimit: RateLimit | null },
  ) {
    const message = isRecord(body) && typeof body.message === 'string' ? body.message : `HTTP ${status}`;
    super(message);
    this.status = status;
    this.code = isRecord(body) && typeof body.error === 'string' ? body.error : null;
    this.requestId = meta.requestId;
    this.retryAfter = meta.retryAfter;
    this.rateLimit = meta.rateLimit;
  }
}
