import { createRequire } from 'node:module';
import createFetchClient, { type Client } from 'openapi-fetch';
import { errorClassOf, type SafetyApiError } from './errors.ts';
import type { paths } from './generated/openapi.ts';
import { type Fetch, integerHeader, type RetryOptions, type Send, sender } from './retry.ts';
import type { RateLimit } from './types.ts';

/**
 * How a client reaches the service, shared by `createClient` and `createOAuthClient`: the origin,
 * the `fetch` every attempt goes through, retries, the timeout and the `User-Agent`.
 */
export interface ConnectionOptions {
  /** The service's origin, e.g. `https://safety.example.com`: no path, no query. */
  baseUrl: string;
  /** Defaults to the global `fetch`. */
  fetch?: Fetch;
  /**
   * How 429 and 503 answers, network failures and timeouts of GETs are retried; `false` sends each
   * call once and reports them at once. A POST (OAuth 2's token, revocation and pushed requests)
   * is never sent again: a code or refresh token it carried may already be spent.
   */
  retry?: RetryOptions | false;
  /**
   * Milliseconds each attempt of a call may take (default 30 000), its whole answer read (an
   * export: its headers); past it, the attempt is aborted and retried, and once `retry` is spent
   * the call rejects with a `TimeoutError`. `false`: no limit. A call may override it.
   */
  timeout?: number | false;
  /** Your application, named after the SDK in the `User-Agent` of every request. */
  appInfo?: { name: string; version?: string };
}

export interface CallOptions {
  /** Aborts the request, and any wait before a retry. */
  signal?: AbortSignal;
  /** This call's `timeout`, in place of the client's. */
  timeout?: number | false;
}

/** Long enough for the largest page on a slow link, short enough not to hang on a lost one. */
const DEFAULT_TIMEOUT_MS = 30_000;
/** The longest delay `setTimeout` takes (about 24.8 days). */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

const SDK_VERSION = (createRequire(import.meta.url)('../package.json') as { version: string }).version;

/** A product token of RFC 9110 (`name/version`): no space, slash or control character. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** `User-Agent`: the SDK, Node.js, then the application when `appInfo` names it. */
function userAgent(appInfo: ConnectionOptions['appInfo']): string {
  const parts = [`safety-incident-sdk/${SDK_VERSION}`, `node/${process.versions.node}`];
  if (appInfo !== undefined) {
    const { name, version } = appInfo;
    if (!TOKEN.test(name) || (version !== undefined && !TOKEN.test(version)))
      throw new TypeError(
        `appInfo: name and version must be single words of letters, digits and -._~ (got ${JSON.stringify(appInfo)})`,
      );
    parts.push(version === undefined ? name : `${name}/${version}`);
  }
  return parts.join(' ');
}

/** A `timeout` option as milliseconds, null for none, or a TypeError that says what is expected. */
function timeoutOf(timeout: unknown): number | null {
  if (timeout === false) return null;
  if (typeof timeout === 'number' && timeout > 0 && timeout <= MAX_TIMEOUT_MS) return timeout;
  throw new TypeError(
    `timeout must be a number of milliseconds above 0 and at most ${MAX_TIMEOUT_MS}, or false for none (got ${String(timeout)})`,
  );
}

/** The service's origin from `baseUrl`, or a TypeError that says what is expected. */
function originOf(baseUrl: unknown): string {
  const expected = "baseUrl must be the service's origin, e.g. https://safety.example.com";
  let url: URL;
  try {
    url = new URL(String(baseUrl));
  } catch {
    throw new TypeError(`${expected} (got ${JSON.stringify(baseUrl)})`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new TypeError(`${expected}: http:// or https:// (got ${JSON.stringify(baseUrl)})`);
  if (url.pathname !== '/' || url.search !== '' || url.hash !== '')
    throw new TypeError(
      `${expected}, without a path or query: the SDK adds /api/v1/public/… and the other paths (got ${JSON.stringify(baseUrl)})`,
    );
  return url.origin;
}

export function rateLimitOf(response: Response): RateLimit | null {
  const limit = integerHeader(response.headers, 'x-ratelimit-limit');
  const remaining = integerHeader(response.headers, 'x-ratelimit-remaining');
  if (limit === null || remaining === null) return null;
  return { limit, remaining, reset: integerHeader(response.headers, 'x-ratelimit-reset') };
}

export function errorOf(response: Response, body: unknown): SafetyApiError {
  const ErrorClass = errorClassOf(response.status);
  return new ErrorClass(response.status, body, {
    requestId: response.headers.get('x-request-id'),
    retryAfter: integerHeader(response.headers, 'retry-after'),
    rateLimit: rateLimitOf(response),
  });
}

/** How one call is sent, beyond its `CallOptions`. */
export interface CallKind {
  /** The body is handed over as it arrives (an export). */
  stream?: boolean;
  /**
   * Whether the call may be sent again (default true, for GETs): false for a POST, and for a probe
   * whose 503 is its answer.
   */
  retry?: boolean;
}

/** The typed requests of one service, each sent within the client's timeout and retries. */
export class Transport {
  readonly origin: string;
  readonly api: Client<paths>;
  readonly #send: Send;
  readonly #timeout: number | false;

  /** `wrap`: a step every call goes through first (the ETag cache). */
  constructor(
    {
      baseUrl,
      fetch = globalThis.fetch,
      retry = {},
      timeout = DEFAULT_TIMEOUT_MS,
      appInfo,
    }: ConnectionOptions,
    wrap: (send: Send) => Send = (send) => send,
  ) {
    timeoutOf(timeout);
    this.#timeout = timeout;
    this.#send = wrap(sender(fetch, retry));
    this.origin = originOf(baseUrl);
    this.api = createFetchClient<paths>({
      baseUrl: this.origin,
      headers: { 'user-agent': userAgent(appInfo) },
    });
  }

  /** A call's options for openapi-fetch: its signal, and the client's way of sending it. */
  init({ signal, timeout = this.#timeout }: CallOptions, { stream = false, retry = true }: CallKind = {}) {
    return {
      signal,
      // Checked here, so that a wrong timeout rejects the call rather than throw.
      fetch: async (request: Request) => this.#send(request, { timeout: timeoutOf(timeout), stream, retry }),
    };
  }
}
