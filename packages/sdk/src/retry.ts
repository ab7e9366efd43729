import { TimeoutError } from './errors.ts';

export type Fetch = (request: Request) => Promise<Response>;

export interface RetryOptions {
  /**
   * Attempts in all, the first one included (default 3). 1 never retries. Counted across 429s,
   * 503s, network failures and timeouts alike.
   */
  maxAttempts?: number;
  /**
   * The most time one call spends waiting between attempts, in milliseconds (default 60 000). A
   * `Retry-After` that would go past it is not waited for: the 429 or 503 is reported at once, so a
   * client at the end of its hourly allowance learns it now rather than an hour later.
   */
  maxWaitMs?: number;
}

/** How one call is sent. */
export interface Exchange {
  /** The milliseconds each attempt may take; null for no limit. */
  timeout: number | null;
  /**
   * Whether the body is handed over as a stream (an export, which may take minutes): the timeout
   * then ends with the answer's headers. Any other body is read whole within the attempt's timeout,
   * so that a body that stalls is a timeout too, and retried like one.
   */
  stream: boolean;
  /**
   * Whether the request may be sent again. A POST may not: the service may have acted on it (spent
   * an authorization code, rotated a refresh token) before its answer was lost.
   */
  retry: boolean;
}

/** Sends one call: its attempts, and the waits between them. */
export type Send = (request: Request, exchange: Exchange) => Promise<Response>;

/**
 * Before the next attempt after a network failure (a refused or reset connection, as while an
 * instance restarts) or a timeout: this, doubled at each attempt, jittered by up to half either way.
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
 * Resolves after `ms`; rejects with the signal's reason (as fetch does) once it aborts. On the
 * global `setTimeout`, as the timeout is: a mocked clock (node:test's `mock.timers`) drives both.
 */
function delay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const abort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', abort);
      resolve();
    }, ms);
    signal.addEventListener('abort', abort, { once: true });
  });
}

type Outcome = { response: Response } | { failure: unknown; timedOut: boolean };

/**
 * One attempt: the answer within `timeout`, its body read whole unless it is streamed. Aborting the
 * call's signal aborts the attempt, and a streamed body while it is read.
 */
async function attempt(fetch: Fetch, request: Request, { timeout, stream }: Exchange): Promise<Outcome> {
  const controller = new AbortController();
  const abort = () => controller.abort(request.signal.reason);
  if (request.signal.aborted) abort();
  else request.signal.addEventListener('abort', abort, { once: true });
  let timedOut = false;
  const timer =
    timeout === null
      ? undefined
      : setTimeout(() => {
          timedOut = true;
          controller.abort(new DOMException('the attempt timed out', 'TimeoutError'));
        }, timeout);
  let streaming = false;
  try {
    // A request is sent again only when it has no body: each time with its own signal.
    const response = await fetch(new Request(request, { signal: controller.signal }));
    if (stream || response.body === null) {
      streaming = stream;
      return { response };
    }
    const body = await response.arrayBuffer();
    // The bytes are decoded: the length and coding the service sent no longer describe them.
    const headers = new Headers(response.headers);
    headers.delete('content-encoding');
    headers.delete('content-length');
    return {
      response: new Response(body, { status: response.status, statusText: response.statusText, headers }),
    };
  } catch (failure) {
    return { failure, timedOut };
  } finally {
    clearTimeout(timer);
    if (!streaming) request.signal.removeEventListener('abort', abort);
  }
}

/**
 * Sends calls through `fetch`, each attempt within its timeout, retrying within the budget: 429 and
 * 503 after their `Retry-After`, and an attempt that failed on the network (fetch rejected, not
 * aborted) or timed out after a short jittered backoff. Only calls whose exchange allows it are
 * retried (the GETs: sending one again is safe). Aborting the request's signal ends an attempt or a
 * wait at once. `retry: false` makes one attempt.
 */
export function sender(fetch: Fetch, retry: RetryOptions | false, random: () => number = Math.random): Send {
  const budget = retry === false ? { maxAttempts: 1 } : retry;
  return async (request, exchange) => {
    const { maxAttempts = 3, maxWaitMs = 60_000 } = exchange.retry ? budget : { maxAttempts: 1 };
    let waitedMs = 0;
    const wait = async (waitMs: number) => {
      await delay(waitMs, request.signal);
      waitedMs += waitMs;
    };
    for (let attempts = 1; ; attempts += 1) {
      const outcome = await attempt(fetch, request, exchange);
      if (!('response' in outcome)) {
        // As fetch does, an aborted call rejects with the signal's reason.
        if (request.signal.aborted) throw outcome.failure;
        const error =
          outcome.timedOut && exchange.timeout !== null
            ? new TimeoutError(request, exchange.timeout, attempts)
            : outcome.failure;
        const waitMs = Math.round(NETWORK_RETRY_BASE_MS * 2 ** (attempts - 1) * (0.5 + random()));
        if (attempts >= maxAttempts || waitedMs + waitMs > maxWaitMs) throw error;
        await wait(waitMs);
        continue;
      }
      const { response } = outcome;
      if (!RETRIED_STATUSES.has(response.status) || attempts >= maxAttempts) return response;
      const waitMs = (integerHeader(response.headers, 'retry-after') ?? DEFAULT_WAIT_SECONDS) * 1000;
      if (waitedMs + waitMs > maxWaitMs) return response;
      // Frees the connection for the next attempt.
      await response.body?.cancel();
      await wait(waitMs);
    }
  };
}
