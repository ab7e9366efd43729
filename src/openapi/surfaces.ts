import { type TSchema, Type } from 'typebox';
import { PROVIDER_ROUTES, REFRESH_ROUTE } from '../oauth/provider.ts';
import { ALL_SCOPES, API_SCOPES, SCOPE_DESCRIPTIONS } from '../oauth/scopes.ts';
import { OAUTH_PATH, PUBLIC_API_PATH, WIDER_API_PATH } from '../paths.ts';
import { OAuthErrorSchema, PAGE_CONTENT } from '../schemas/oauth.ts';
import { HEADERS, type HeaderDoc, type ResponseDoc } from '../schemas/openapi.ts';
import { CodedErrorSchema, ErrorSchema } from '../schemas/public.ts';

/** An answer of a surface's hooks, with its JSON body. */
export interface SurfaceResponse extends ResponseDoc {
  schema: TSchema;
}

/**
 * What every operation of one surface shares, because the surface's own hooks (not its routes)
 * produce it: the credential, the statuses answered before a route runs, and the headers they
 * set. A route under the prefix inherits all of it; the route's own declarations
 * (src/schemas/openapi.ts) come on top.
 */
export interface Surface {
  /** Prefixes the names of its responses in `components.responses`. */
  name: string;
  prefix: string;
  /** The security requirement of an operation that declares none. */
  security: Record<string, string[]>[];
  /** Headers of every response. */
  everyResponse: HeaderDoc[];
  /** Headers of every status the route declares itself: the request was admitted and counted. */
  admitted: HeaderDoc[];
  /** Statuses every operation can answer before its route runs. */
  responses: Record<number, SurfaceResponse>;
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

/**
 * What any request may get before its surface looks at it (src/app.ts): a body declared over the
 * limit, on any path and any method, before the credential checks.
 */
const payloadTooLarge: SurfaceResponse = {
  schema: ErrorSchema,
  description: 'A request body over 1 MiB (none of these operations reads one); the connection is closed.',
  examples: {
    tooLarge: {
      error: true,
      message: 'The request body is too large: this service accepts at most 1048576 bytes.',
    },
  },
};

const internal: SurfaceResponse = {
  schema: ErrorSchema,
  description: 'Unexpected server error; never a stack or SQL.',
  examples: { internal: { error: true, message: 'Internal server error' } },
};

const unavailable: SurfaceResponse = {
  schema: ErrorSchema,
  description:
    'The database is unavailable, or this instance is shutting down: retry after `Retry-After` seconds.',
  headers: [HEADERS.retryAfter],
  examples: { unavailable: { error: true, message: 'Service temporarily unavailable' } },
};

const failures: Record<number, SurfaceResponse> = { 413: payloadTooLarge, 500: internal, 503: unavailable };

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
    429: rateLimited('this API key'),
    ...failures,
  },
};

const widerApi: Surface = {
  name: 'Wider',
  prefix: WIDER_API_PATH,
  security: [{ oauth2: [] }],
  everyResponse: [HEADERS.requestId],
  admitted: RATE_LIMIT,
  responses: {
    401: {
      schema: ErrorSchema,
      description:
        'No access token, an API key instead of one, or a token that is invalid, expired or revoked.',
      headers: [HEADERS.wwwAuthenticate],
      examples: {
        tokenRequired: {
          error: true,
          message: 'An OAuth 2 access token is required: send "Authorization: Bearer <token>".',
        },
        tokenInvalid: { error: true, message: 'The access token is invalid, expired or revoked.' },
      },
    },
    403: {
      // The plan's refusal has the public API's code; a missing scope is this API's plain error.
      schema: Type.Union([CodedErrorSchema, ErrorSchema]),
      description:
        "`FEATURE_NOT_AVAILABLE`: the account's plan does not include API access. Or the token lacks this list's scope (then `WWW-Authenticate` names it).",
      examples: {
        featureNotAvailable,
        insufficientScope: { error: true, message: 'The access token lacks the "incidents:read" scope.' },
      },
    },
    429: rateLimited('this OAuth client'),
    ...failures,
  },
};

const oauth: Surface = {
  name: 'OAuth',
  prefix: OAUTH_PATH,
  // The discovery document, the keys and the browser's endpoints take none; the others say theirs.
  security: [],
  everyResponse: [HEADERS.requestId],
  admitted: [],
  responses: {
    413: payloadTooLarge,
    500: {
      schema: OAuthErrorSchema,
      description:
        'Unexpected server error: `server_error`, or a page on the endpoints a browser visits (`/authorize`, `/session/end`).',
      content: PAGE_CONTENT,
      examples: { serverError: { error: 'server_error', error_description: 'oops! something went wrong' } },
    },
    503: {
      ...unavailable,
      description: `${unavailable.description} A page on the endpoints a browser visits.`,
      content: PAGE_CONTENT,
    },
  },
};

/** Outside the versioned paths: the probes. */
const health: Surface = {
  name: 'Health',
  prefix: '',
  security: [],
  everyResponse: [HEADERS.requestId],
  admitted: [],
  responses: failures,
};

/** Longest prefix first: the public API is mounted inside the wider API's path, and all in the root. */
export const SURFACES: Surface[] = [publicApi, oauth, widerApi, health];

export function surfaceOf(url: string): Surface | undefined {
  return SURFACES.find((surface) => url.startsWith(`${surface.prefix}/`));
}

export function securitySchemes(baseUrl: string): Record<string, unknown> {
  const issuer = `${baseUrl}${OAUTH_PATH}`;
  const described = (scopes: readonly string[]) =>
    Object.fromEntries(scopes.map((scope) => [scope, SCOPE_DESCRIPTIONS[scope] ?? scope]));
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
          authorizationUrl: `${issuer}${PROVIDER_ROUTES.authorization}`,
          tokenUrl: `${issuer}${PROVIDER_ROUTES.token}`,
          refreshUrl: `${issuer}${REFRESH_ROUTE}`,
          scopes: described(ALL_SCOPES),
        },
        // No user signs in: only the account's data scopes mean anything.
        clientCredentials: { tokenUrl: `${issuer}${PROVIDER_ROUTES.token}`, scopes: described(API_SCOPES) },
      },
    },
    oauthClient: {
      type: 'http',
      scheme: 'basic',
      description:
        "How a client authenticates to the token, revocation and pushed authorization endpoints: a confidential client's `client_id` and `client_secret` in this header (client_secret_basic) or in the form (client_secret_post); a public client sends only `client_id` in the form, and proves itself with PKCE.",
    },
  };
}
