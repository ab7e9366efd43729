import { setTimeout as sleep } from 'node:timers/promises';

export type Fetch = (request: Request) => Promise<Response>;

export interface RetryOptions {
  /** Attempts in all, the first one included (default 3). 1 never retries. */
  maxAttempts?: number;
  /**
   * The most time one call spends waiting between attempts, in milliseconds (default 60 000). A
   * `Retry-After` that would go past it is not waited for: the 429 or 503 is reported at once, so a
   * client at the end of its hourly allowance learns it now rather than an hour later.
   */
  maxWaitMs?: number;
}

/** What the service answers when the caller should come back later, with `Retry-After`. */
const RETRIED_STATUSES = new Set([429, 503]);
/** A 429 or 503 from something in front of the service may come without `Retry-After`. */
const DEFAULT_WAIT_SECONDS = 1;

/**
 * A header holding a whole number, as the service sends `Retry-After` (seconds) and `X-RateLimit-*`;
 * null when absent or in another form.
 */
export function integerHeader(headers: Headers, name: string): number | null {
  const value = headers.get(name);
  return value !== null && /^\d+$/.test(value) ? Number(value) : null;
}

/**
 * `fetch`, retrying 429 and 503 after their `Retry-After` within the budget. Aborting the
 * request's signal ends a wait at once.
 */
export function retryingFetch(fetch: Fetch, { maxAttempts = 3, maxWaitMs = 60_000 }: RetryOptions): Fetch {
  return async (request) => {
    let waitedMs = 0;
    for (let attempt = 1; ; attempt += 1) {
      // Every request the SDK sends is a GET without a body, so the same Request can be sent again.
      const response = await fetch(request);
      if (!RETRIED_STATUSES.has(response.status) || attempt >= maxAttempts) return response;
      const waitMs = (integerHeader(response.headers, 'retry-after') ?? DEFAULT_WAIT_SECONDS) * 1000;
      if (waitedMs + waitMs > maxWaitMs) return response;
      // Frees the connection for the next attempt.
      await response.body?.cancel();
      await sleep(waitMs, undefined, { signal: request.signal }).catch(() => {
        // As fetch does, an aborted call rejects with the signal's reason.
        throw request.signal.reason;
      });
      waitedMs += waitMs;
    }
  };
}
