import type { components } from './generated/openapi.ts';
import type { RateLimit } from './types.ts';

/**
 * The codes the contract puts in `error` (401, 403, 429, and the changes feed's 400 and 410), as
 * the OpenAPI document's `CodedError` schema lists them, or an OAuth 2 error (`invalid_grant`…).
 */
export type ErrorCode =
  | components['schemas']['CodedError']['error']
  | components['schemas']['OAuthError']['error']
  // A code this version of the SDK does not know yet, still reported as it came.
  | (string & {});

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Any answer but a 2xx. `code` is the contract's `error` string (or OAuth 2's, with its
 * `error_description` as the message), or null when the body has `"error": true` (404, 405, 500,
 * 503) or is not the API's JSON (a proxy's page).
 */
export class SafetyApiError extends Error {
  override readonly name: string = 'SafetyApiError';
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
    const text = isRecord(body) ? (body.message ?? body.error_description) : undefined;
    const message = typeof text === 'string' ? text : `HTTP ${status}`;
    super(message);
    this.status = status;
    this.code = isRecord(body) && typeof body.error === 'string' ? body.error : null;
    this.requestId = meta.requestId;
    this.retryAfter = meta.retryAfter;
    this.rateLimit = meta.rateLimit;
  }
}

/**
 * 401: the key is missing, malformed (`API_KEY_REQUIRED`), unknown, disabled, revoked or expired
 * (`API_KEY_INVALID`); the access token is missing or no longer valid; the OAuth client's
 * credentials are wrong (`invalid_client`).
 */
export class AuthenticationError extends SafetyApiError {
  override readonly name: string = 'AuthenticationError';
}

/**
 * 403: the account's plan has no API access (`FEATURE_NOT_AVAILABLE`), or the key's scope (or the
 * access token's) is too narrow.
 */
export class PermissionError extends SafetyApiError {
  override readonly name: string = 'PermissionError';
}

/** 404: no such record in the key's account (or no such path). */
export class NotFoundError extends SafetyApiError {
  override readonly name: string = 'NotFoundError';
}

/** 429: the hourly allowance is used up; `retryAfter` says in how many seconds it comes back. */
export class RateLimitError extends SafetyApiError {
  override readonly name: string = 'RateLimitError';
}

/** 503: the service cannot reach its store for a moment; try again after `retryAfter` seconds. */
export class ServiceUnavailableError extends SafetyApiError {
  override readonly name: string = 'ServiceUnavailableError';
}

/**
 * No whole answer within the client's `timeout` (per attempt): not a SafetyApiError, since no answer
 * came. A timed-out GET is retried like a network failure (safe to send again) while the `retry`
 * budget lasts; this is thrown once it is spent, at once with `retry: false`, and at once for a
 * POST.
 */
export class TimeoutError extends Error {
  override readonly name: string = 'TimeoutError';
  /** The timeout of each attempt, in milliseconds. */
  readonly timeout: number;
  /** The attempts made in all; the last one ran out of time. */
  readonly attempts: number;

  constructor(request: { method: string; url: string }, timeout: number, attempts: number) {
    super(
      `${request.method} ${request.url}: no answer within the ${timeout} ms timeout` +
        (attempts > 1 ? ` (${attempts} attempts)` : ''),
    );
    this.timeout = timeout;
    this.attempts = attempts;
  }
}

/** The error class of an answer's status: a subclass where one exists, else SafetyApiError itself. */
export function errorClassOf(status: number): typeof SafetyApiError {
  switch (status) {
    case 401:
      return AuthenticationError;
    case 403:
      return PermissionError;
    case 404:
      return NotFoundError;
    case 429:
      return RateLimitError;
    case 503:
      return ServiceUnavailableError;
    default:
      return SafetyApiError;
  }
}
