import type { FastifyError, FastifyInstance } from 'fastify';
import { isStoreUnavailable, STORE_RETRY_AFTER_SECONDS } from './db/store-health.ts';
import { BEARER_REALM } from './paths.ts';

/**
 * The one error type of the HTTP layer. Contract errors carry a string `code` (the body's `error`
 * field); the others (404, 405, 500) answer `error: true`, as the spec's table says.
 */
export class ApiError extends Error {
  override name = 'ApiError';
  constructor(
    readonly statusCode: number,
    readonly code: string | null,
    message: string,
    readonly headers: Record<string, string | number> = {},
  ) {
    super(message);
  }

  get body(): { error: string | true; message: string } {
    return { error: this.code ?? true, message: this.message };
  }

  static apiKeyRequired(): ApiError {
    return new ApiError(
      401,
      'API_KEY_REQUIRED',
      'An API key is required: send the header "Authorization: Bearer svc_<40 hex characters>".',
      { 'www-authenticate': BEARER_REALM },
    );
  }

  static apiKeyInvalid(): ApiError {
    return new ApiError(401, 'API_KEY_INVALID', 'The API key is unknown, disabled, revoked or expired.', {
      'www-authenticate': `${BEARER_REALM}, error="invalid_token"`,
    });
  }

  static featureNotAvailable(): ApiError {
    return new ApiError(403, 'FEATURE_NOT_AVAILABLE', "The account's plan does not include API access.");
  }

  static insufficientScope(method: string, scope: string): ApiError {
    return new ApiError(
      403,
      'INSUFFICIENT_SCOPE',
      `The API key's scope "${scope}" does not permit ${method} requests.`,
    );
  }

  /** `holder`: what the allowance is counted for, as the message names it. */
  static rateLimitExceeded(limit: number, retryAfterSeconds: number, holder = 'this API key'): ApiError {
    return new ApiError(
      429,
      'RATE_LIMIT_EXCEEDED',
      `The hourly limit of ${limit} requests for ${holder} is reached; retry in ${retryAfterSeconds} seconds.`,
      { 'retry-after': retryAfterSeconds, 'x-ratelimit-limit': limit, 'x-ratelimit-remaining': 0 },
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

  static methodNotAllowed(allow: string): ApiError {
    return new ApiError(405, null, 'Method not allowed: this API is read-only.', { allow });
  }
}

/** Installs the single error handler and not-found handler of the application. */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | ApiError, request, reply) => {
    if (error instanceof ApiError) {
      if (error.statusCode === 429) reply.removeHeader('x-ratelimit-reset');
      return reply.code(error.statusCode).headers(error.headers).send(error.body);
    }
    // Logged once per outage by the store monitor (`src/db/store-health.ts`), not per request.
    if (isStoreUnavailable(error)) {
      const unavailable = ApiError.storeUnavailable();
      return reply.code(503).headers(unavailable.headers).send(unavailable.body);
    }
    // A client error raised by Fastify itself (unparseable body, body too large, bad content type).
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
 * Bad input to an operator-facing operation (CLI, import, admin form): the message is one line
 * that says what is wrong and is safe to show as it is.
 */
export class InputError extends Error {
  override name = 'InputError';
}
