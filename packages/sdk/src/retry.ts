import { setTimeout as sleep } from 'node:timers/promises';

export type Fetch = (request: Request) => Promise<Response>;

export interface RetryOptions {
  /**
   * Attempts in all, the first one included (default 3). 1 never retries. Counted across 429s,
   * 503s and network failures alike.
   */
  maxAttempts?: number;
  /**
   * The most time one call spends waiting between attempts, in milliseconds (default 60 000). A
   * `Retry-After` that would go past it is not waited for: the 429 or 503 is reported at once, so a
   * client at the end of its hourly allowance learns it now rather than an hour later.
   */
  maxWaitMs?: number;
}

/**
 * Before the next attempt after a network failure (a refused or reset connection, as while an
 * instance restarts): this, doubled at each attempt, jittered by up to half either way.
 */
const NETWORK_RETRY_BASE_MS = 250;

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
 * `fetch`, retrying within the budget: 429 and 503 after their `Retry-After`, and a request that
 * failed on the network (fetch rejected, not aborted) after a short jittered backoff. Every request
 * the SDK sends is a GET, so sending it again is safe. Aborting the request's signal ends a wait at
 * once.
 */
export function retryingFetch(
  fetch: Fetch,
  { maxAttempts = 3, maxWaitMs = 60_000 }: RetryOptions,
  random: () => number = Math.random,
): Fetch {
  return async (request) => {
    let waitedMs = 0;
    const wait = async (waitMs: number) => {
      await sleep(waitMs, undefined, { signal: request.signal }).catch(() => {
        // As fetch does, an aborted call rejects with the signal's reason.
        throw request.signal.reason;
      });
      waitedMs += waitMs;
    };
    for (let attempt = 1; ; attempt += 1) {
      // A GET without a body: the same Request can be sent again.
      let response: Response;
      try {
        response = await fetch(request);
      } catch (error) {
        const waitMs = Math.round(NETWORK_RETRY_BASE_MS * 2 ** (attempt - 1) * (0.5 + random()));
        if (request.signal.aborted || attempt >= maxAttempts || waitedMs + waitMs > maxWaitMs) throw error;
        await wait(waitMs);
        continue;
      }
      if (!RETRIED_STATUSES.has(response.status) || attempt >= maxAttempts) return response;
      const waitMs = (integerHeader(response.headers, 'retry-after') ?? DEFAULT_WAIT_SECONDS) * 1000;
      if (waitedMs + waitMs > maxWaitMs) return response;
      // Frees the connection for the next attempt.
      await response.body?.cancel();
      await wait(waitMs);
    }
  };
}
