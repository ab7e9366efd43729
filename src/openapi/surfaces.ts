import { type TSchema, Type } from 'typebox';
import { API_SCOPES, SCOPE_DESCRIPTIONS } from '../oauth/scopes.ts';
import { OAUTH_PATH, PUBLIC_API_PATH, WIDER_API_PATH } from '../paths.ts';
import { HEADERS, type HeaderDoc, type ResponseDoc } from '../schemas/openapi.ts';
import { CodedErrorSchema, ErrorSchema } from '../schemas/public.ts';

/**
 * What every operation of one API surface shares, because the surface's own hooks (not its routes)
 * produce it: the credential, the statuses answered before a route runs, the headers they set,
 * and the answer to methods no route takes. A route under the prefix inherits all of it; the
 * route's own declarations (src/schemas/openapi.ts) come on top.
 */
export interface SurfaceResponse extends ResponseDoc {
  schema: TSchema;
}

export interface Surface {
  /** Prefixes the names of its responses in `components.responses`. */
  name: string;
  prefix: string;
  /** The security requirement of an operation that declares none. */
  security: Record<string, string[]>[];
  /** Headers of every response. */
  everyResponse: HeaderDoc[];
  /**
   * Headers of every response given once the request is admitted (the allowance counted): every
   * status the route declares itself, and the 405.
   */
  admitted: HeaderDoc[];
  /** Statuses every operation can answer before its route runs. */
  responses: Record<number, SurfaceResponse>;
  /** Methods no route of the surface takes, and what they get instead. */
  refused: { methods: string[]; responses: Record<number, SurfaceResponse> };
}

const RATE_LIMIT = [HEADERS.rateLimitLimit, HEADERS.rateLimitRemaining, HEADERS.rateLimitReset];

const rateLimited = (holder: string): SurfaceResponse => ({
  schema: CodedErrorSchema,
  description: `The hourly allowance of ${holder} is used up. No \`X-RateLimit-Reset\`: \`Retry-After\` says when to retry.`,
  headers: [HEADERS.retryAfter, HEADERS.rateLimitLimit, HEADERS.rateLimitRemaining],
  examples: {
    rateLimitExceeded: {
      error: 'RATE_LIMIT_EXCEEDED',
      message: `The hourly limit of 1000 requests for ${holder} is reached; retry in 120 seconds.`,
    },
  },
});

const failures: Record<number, SurfaceResponse> = {
  500: {
    schema: ErrorSchema,
    description: 'Unexpected server error; never a stack or SQL.',
    examples: { internal: { error: true, message: 'Internal server error' } },
  },
  503: {
    schema: ErrorSchema,
    description:
      'The database is unavailable, or this instance is shutting down: retry after `Retry-After` seconds.',
    headers: [HEADERS.retryAfter],
    examples: { unavailable: { error: true, message: 'Service temporarily unavailable' } },
  },
};

const methodNotAllowed: SurfaceResponse = {
  schema: ErrorSchema,
  description: 'The API is read-only: `Allow` names the methods that exist.',
  headers: [HEADERS.allow, ...RATE_LIMIT],
  examples: { readOnly: { error: true, message: 'Method not allowed: this API is read-only.' } },
};

const WRITE_METHODS = ['POST', 'PUT', 'PATCH', 'DELETE'];

const publicApiKeyRequired: SurfaceResponse = {
  schema: CodedErrorSchema,
  description:
    '`API_KEY_REQUIRED`: no `Authorization: Bearer svc_…` header, or a malformed one. `API_KEY_INVALID`: the key is unknown, disabled, revoked or expired.',
  headers: [HEADERS.wwwAuthenticate],
  examples: {
    apiKeyRequired: {
      error: 'API_KEY_REQUIRED',
      message: 'An API key is required: send the header "Authorization: Bearer svc_<40 hex characters>".',
    },
    apiKeyInvalid: {
      error: 'API_KEY_INVALID',
      message: 'The API key is unknown, disabled, revoked or expired.',
    },
  },
};

const featureNotAvailable = {
  error: 'FEATURE_NOT_AVAILABLE',
  message: "The account's plan does not include API access.",
};

const publicRateLimited = rateLimited('this API key');
const widerRateLimited = rateLimited('this OAuth client');

const publicApi: Surface = {
  name: 'Public',
  prefix: PUBLIC_API_PATH,
  security: [{ apiKey: [] }],
  everyResponse: [HEADERS.requestId],
  admitted: RATE_LIMIT,
  responses: {
    401: publicApiKeyRequired,
    403: {
      schema: CodedErrorSchema,
      description: "`FEATURE_NOT_AVAILABLE`: the account's plan does not include API access.",
      examples: { featureNotAvailable },
    },
    429: publicRateLimited,
    ...failures,
  },
  refused: {
    methods: WRITE_METHODS,
    responses: {
      401: publicApiKeyRequired,
      403: {
        schema: CodedErrorSchema,
        description:
          "`INSUFFICIENT_SCOPE`: a `read` key may not use write methods. `FEATURE_NOT_AVAILABLE`: the account's plan does not include API access.",
        examples: {
          insufficientScope: {
            error: 'INSUFFICIENT_SCOPE',
            message: 'The API key\'s scope "read" does not permit POST requests.',
          },
          featureNotAvailable,
        },
      },
      405: {
        ...methodNotAllowed,
        description: `A \`read-write\` or \`admin\` key: ${methodNotAllowed.description}`,
      },
      429: publicRateLimited,
      ...failures,
    },
  },
};

const widerTokenRequired: SurfaceResponse = {
  schema: ErrorSchema,
  description: 'No access token, an API key instead of one, or a token that is invalid, expired or revoked.',
  headers: [HEADERS.wwwAuthenticate],
  examples: {
    tokenRequired: {
      error: true,
      message: 'An OAuth 2 access token is required: send "Authorization: Bearer <token>".',
    },
    tokenInvalid: { error: true, message: 'The access token is invalid, expired or revoked.' },
  },
};

const widerForbidden: SurfaceResponse = {
  // The plan's refusal has the public API's code; a missing scope is this API's plain error.
  schema: Type.Union([CodedErrorSchema, ErrorSchema]),
  description:
    "`FEATURE_NOT_AVAILABLE`: the account's plan does not include API access. Or the token lacks this list's scope (then `WWW-Authenticate` names it).",
  examples: {
    featureNotAvailable,
    insufficientScope: { error: true, message: 'The access token lacks the "incidents:read" scope.' },
  },
};

const widerApi: Surface = {
  name: 'Wider',
  prefix: WIDER_API_PATH,
  security: [{ oauth2: [] }],
  everyResponse: [HEADERS.requestId],
  admitted: RATE_LIMIT,
  responses: {
    401: widerTokenRequired,
    403: widerForbidden,
    429: widerRateLimited,
    ...failures,
  },
  refused: {
    methods: WRITE_METHODS,
    responses: {
      401: widerTokenRequired,
      403: {
        ...widerForbidden,
        schema: CodedErrorSchema,
        description: "`FEATURE_NOT_AVAILABLE`: the account's plan does not include API access.",
        examples: { featureNotAvailable },
      },
      405: methodNotAllowed,
      429: widerRateLimited,
      ...failures,
    },
  },
};

/** Longest prefix first: the public API is mounted inside the wider API's path. */
export const SURFACES: Surface[] = [publicApi, widerApi];

export function surfaceOf(url: string): Surface | undefined {
  return SURFACES.find((surface) => url.startsWith(`${surface.prefix}/`));
}

export function securitySchemes(baseUrl: string): Record<string, unknown> {
  const issuer = `${baseUrl}${OAUTH_PATH}`;
  const scopes = Object.fromEntries(API_SCOPES.map((scope) => [scope, SCOPE_DESCRIPTIONS[scope] ?? scope]));
  return {
    apiKey: {
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'svc_ followed by 40 lowercase hex characters',
      description:
        'An API key of the account, created by a Super Admin in the admin panel (Settings, Integrations, API Keys): `Authorization: Bearer svc_…`.',
    },
    oauth2: {
      type: 'oauth2',
      description: `OAuth 2 access tokens of the account's registered clients. OpenID Connect discovery: ${issuer}/.well-known/openid-configuration`,
      flows: {
        authorizationCode: {
          authorizationUrl: `${issuer}/authorize`,
          tokenUrl: `${issuer}/token`,
          refreshUrl: `${issuer}/token/refresh`,
          scopes,
        },
        clientCredentials: { tokenUrl: `${issuer}/token`, scopes },
      },
    },
  };
}
