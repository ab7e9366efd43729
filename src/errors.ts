import type { IncomingMessage } from 'node:http';
import { maxHeaderSize, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isStoreUnavailable, STORE_RETRY_AFTER_SECONDS } from './db/store-health.ts';
import { BEARER_REALM } from './paths.ts';

/**
 * The most request body the service reads, on any path (Fastify's default, made explicit for the
 * check of a declared length in app.ts): its bodies are small forms (admin panel, OAuth), and the
 * read-only APIs read none.
 */
export const BODY_LIMIT_BYTES = 1024 * 1024;

/**
 * Every code the API puts in an error body's `error` field, with its status and when it is
 * answered: the one list that `ApiError`, the `CodedError` schema's enum and the reference's
 * Errors guide read. Any other error answers `error: true` (404, 405, 413, 500, 503, the wider
 * API's 400, 401 and scope 403).
 */
export const ERROR_CODES = {
  INVALID_CURSOR: {
    status: 400,
    when: "a `/changes` cursor this API did not issue to this account: garbled, altered, or another account's.",
  },
  API_KEY_REQUIRED: {
    status: 401,
    when: 'no `Authorization` header, or not `Bearer svc_` followed by 40 lowercase hex characters.',
  },
  API_KEY_INVALID: { status: 401, when: 'the key is unknown, disabled, revoked or expired.' },
  FEATURE_NOT_AVAILABLE: {
    status: 403,
    when: "the account's plan does not include API access (on both APIs).",
  },
  INSUFFICIENT_SCOPE: {
    status: 403,
    when: 'a method other than `GET` or `HEAD` with a `read` key (a `read-write` or `admin` key gets 405: the API is read-only).',
  },
  CURSOR_EXPIRED: {
    status: 410,
    when: 'a `/changes` cursor the feed can no longer continue from without perhaps missing a change (older than the retention): sync again.',
  },
  RATE_LIMIT_EXCEEDED: {
    status: 429,
    when: 'the hourly allowance of the key (or OAuth client) is used up: retry after `Retry-After` seconds.',
  },
} as const satisfies Record<string, { status: number; when: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

/**
 * The one error type of the HTTP layer. Contract errors carry a string `code` (the body's `error`
 * field, one of `ERROR_CODES`); the others (404, 405, 500) answer `error: true`, as the spec's
 * table says.
 */
export class ApiError extends Error {
  override name = 'ApiError';
  readonly statusCode: number;
  readonly code: ErrorCode | null;
  readonly headers: Record<string, string | number>;

  constructor(
    statusCode: number,
    code: ErrorCode | null,
    message: string,
    headers: Record<string, string | number> = {},
  ) {
    super(message);
    this.statusCode = statusCode;
    this.code = code;
    this.headers = headers;
  }

  get body(): { error: ErrorCode | true; message: string } {
    return { error: this.code ?? true, message: this.message };
  }

  /** An answer with one of `ERROR_CODES`, at that code's status. */
  private static coded(
    code: ErrorCode,
    message: string,
    headers: Record<string, string | number> = {},
  ): ApiError {
    return new ApiError(ERROR_CODES[code].status, code, message, headers);
  }

  static apiKeyRequired(): ApiError {
    return ApiError.coded(
      'API_KEY_REQUIRED',
      'An API key is required: send the header "Authorization: Bearer svc_<40 hex characters>".',
      { 'www-authenticate': BEARER_REALM },
    );
  }

  static apiKeyInvalid(): ApiError {
    return ApiError.coded('API_KEY_INVALID', 'The API key is unknown, disabled, revoked or expired.', {
      'www-authenticate': `${BEARER_REALM}, error="invalid_token"`,
    });
  }

  static featureNotAvailable(): ApiError {
    return ApiError.coded('FEATURE_NOT_AVAILABLE', "The account's plan does not include API access.");
  }

  static insufficientScope(method: string, scope: string): ApiError {
    return ApiError.coded(
      'INSUFFICIENT_SCOPE',
      `The API key's scope "${scope}" does not permit ${method} requests.`,
    );
  }

  /** `holder`: what the allowance is counted for, as the message names it. */
  static rateLimitExceeded(limit: number, retryAfterSeconds: number, holder = 'this API key'): ApiError {
    return ApiError.coded(
      'RATE_LIMIT_EXCEEDED',
      `The hourly limit of ${limit} requests for ${holder} is reached; retry in ${retryAfterSeconds} seconds.`,
      { 'retry-after': retryAfterSeconds, 'x-ratelimit-limit': limit, 'x-ratelimit-remaining': 0 },
    );
  }

  /** A changes-feed cursor this service did not issue to this account (garbled, altered, another's). */
  static invalidCursor(): ApiError {
    return ApiError.coded(
      'INVALID_CURSOR',
      'The cursor is not one this API issued to this account: send next_cursor exactly as received, or start again without a cursor.',
    );
  }

  /**
   * A changes-feed cursor the feed can no longer continue without perhaps missing a change (older
   * than the retention, or a deletion it had not reached was purged): the client must sync again.
   */
  static cursorExpired(retentionDays: number): ApiError {
    return ApiError.coded(
      'CURSOR_EXPIRED',
      `The cursor has expired: the feed keeps deletions for ${retentionDays} days and can no longer continue from it. Start again without a cursor (a full sync).`,
    );
  }

  static notFound(message = 'Not found'): ApiError {
    return new ApiError(404, null, message);
  }

  /** The store is down or past its deadline: worth retrying soon, so never a 500 or a 401. */
  static storeUnavailable(): ApiError {
    return new ApiError(503, null, 'Service temporarily unavailable', {
      'retry-after': STORE_RETRY_AFTER_SECONDS,
    });
  }

  /**
   * This instance is shutting down: a retry on a new connection reaches another instance (or
   * this one restarted), so it may come at once.
   */
  static shuttingDown(): ApiError {
    return new ApiError(503, null, 'Service temporarily unavailable', {
      'retry-after': 1,
      connection: 'close',
    });
  }

  /** A request body over `BODY_LIMIT_BYTES`, on any path. */
  static payloadTooLarge(): ApiError {
    return new ApiError(
      413,
      null,
      `The request body is too large: this service accepts at most ${BODY_LIMIT_BYTES} bytes.`,
    );
  }

  static methodNotAllowed(allow: string): ApiError {
    return new ApiError(405, null, 'Method not allowed: this API is read-only.', { allow });
  }

  /**
   * A request to a read-only API that no route takes: an unknown path for a read method, and for
   * any other method (write verbs, OPTIONS, TRACE, WebDAV…) a 405 naming the methods that exist.
   */
  static unrouted(method: string): ApiError {
    return method === 'GET' || method === 'HEAD'
      ? ApiError.notFound()
      : ApiError.methodNotAllowed('GET, HEAD');
  }
}

/**
 * The answer to an error that means the store is unavailable (503 with Retry-After), or `null` for
 * any other error. Surfaces with error pages of their own (the admin panel) send its status and
 * headers with their page.
 */
export function storeOutage(error: unknown): ApiError | null {
  return isStoreUnavailable(error) ? ApiError.storeUnavailable() : null;
}

/**
 * The ApiError that a framework or store error stands for, or `null`: a store outage (503), and a
 * body that Fastify's parser found over the limit while reading it, answered as one whose declared
 * length is over it (app.ts).
 */
function asApiError(error: FastifyError): ApiError | null {
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return ApiError.payloadTooLarge();
  // Logged once per outage by the store monitor (`src/db/store-health.ts`), not per request.
  return storeOutage(error);
}

/** Installs the single error handler and not-found handler of the application. */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | ApiError, request, reply) => {
    const answer = error instanceof ApiError ? error : asApiError(error);
    if (answer !== null) {
      if (answer.statusCode === 429) reply.removeHeader('x-ratelimit-reset');
      return reply.code(answer.statusCode).headers(answer.headers).send(answer.body);
    }
    // A client error raised by Fastify itself (unparseable body, bad content type).
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      return reply.code(status).send({ error: true, message: error.message });
    }
    request.log.error({ err: error }, 'unhandled error');
    return reply.code(500).send({ error: true, message: 'Internal server error' });
  });

  app.setNotFoundHandler((_request, reply) => {
    return reply.code(404).send(ApiError.notFound().body);
  });
}

/**
 * A path whose percent-encoding does not decode (`/incidents/%ff`) would make the router answer with
 * its own 400 body before any hook runs. Its `%` signs are taken literally instead, so the request
 * is routed like any other and gets the surface's own answer, after its credential checks: the key
 * checks and a 404 on the public API, the panel's 404 page under /admin.
 */
function escapeUndecodablePath(req: IncomingMessage): string {
  const url = req.url ?? '/';
  const pathEnd = url.search(/[?#]/);
  const path = pathEnd === -1 ? url : url.slice(0, pathEnd);
  if (!path.includes('%')) return url;
  try {
    decodeURI(path);
    return url;
  } catch {
    return path.replaceAll('%', '%25') + url.slice(path.length);
  }
}

/**
 * How long a connection answered by `answerUnreadableRequest` keeps reading what the client still
 * sends before it is closed anyway (nginx's `lingering_timeout`).
 */
const LINGER_MS = 5000;

/**
 * A request the HTTP parser cannot read (no valid request line, malformed or oversized headers)
 * never becomes a request: there is no path or credential to check. It gets the contract's error
 * shape (400 `Bad request`, or 408 when it did not arrive in time), not Fastify's or Node's.
 *
 * The answer is followed by a FIN, and what the client still sends is read and dropped until it
 * closes its side (at most LINGER_MS): closing a socket with unread bytes, or bytes still coming,
 * makes the kernel answer with a reset, which can make the client lose the answer itself.
 */
function answerUnreadableRequest(error: Error & { code?: string }, socket: Socket): void {
  // A reset connection has no one to answer. An answered one is closing: the parser reports the
  // same error again for every later chunk of it.
  if (error.code === 'ECONNRESET' || socket.destroyed || socket.writableEnded) return;
  const [status, message] =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'The request was not received in time.']
      : [400, 'Bad request'];
  const body = JSON.stringify({ error: true, message });
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
  const linger = setTimeout(() => socket.destroy(), LINGER_MS).unref();
  socket.once('close', () => clearTimeout(linger));
}

/**
 * Factory options that keep Fastify's own error bodies (`FST_…`, `statusCode`) from ever reaching a
 * client. A path parameter may be as long as a request line can be, so an over-long id reaches its
 * route and is "not found" there; an undecodable path is routed as literal text. What the router
 * still refuses (an absolute-form target without a usable path) has no path to be found at.
 */
export const frameworkErrorOptions = {
  routerOptions: { maxParamLength: maxHeaderSize },
  rewriteUrl: escapeUndecodablePath,
  frameworkErrors: (_error: FastifyError, _request: FastifyRequest, reply: FastifyReply) => {
    // Fastify sends it and handles its failure; nothing is awaited in a framework error hook.
    void reply.code(404).send(ApiError.notFound().body);
  },
  clientErrorHandler: answerUnreadableRequest,
};

/**
 * Bad input to an operator-facing operation (CLI, import, admin form): the message is one line
 * that says what is wrong and is safe to show as it is.
 */
export class InputError extends Error {
  override name = 'InputError';
}
