import type { FastifySchema, HTTPMethods } from 'fastify';
import { type TSchema, Type } from 'typebox';

/**
 * What a route declares for the OpenAPI document beyond the JSON bodies of `schema.response`
 * (which Fastify also serializes through, so they cannot drift). The generator (src/openapi/)
 * reads it from the route's `config.openapi`; a route never builds OpenAPI objects itself.
 */

/** A response header, documented once in `components.headers` under `name`. */
export interface HeaderDoc {
  name: string;
  description: string;
  schema: TSchema;
  example: string | number;
}

const header = (name: string, description: string, schema: TSchema, example: string | number) => ({
  name,
  description,
  schema,
  example,
});

export const HEADERS = {
  rateLimitLimit: header(
    'X-RateLimit-Limit',
    "The hourly allowance of requests: the account's `rate_limit_per_hour`.",
    Type.Integer({ minimum: 0 }),
    1000,
  ),
  rateLimitRemaining: header(
    'X-RateLimit-Remaining',
    'Requests left in the current hourly window, this one included.',
    Type.Integer({ minimum: 0 }),
    998,
  ),
  rateLimitReset: header(
    'X-RateLimit-Reset',
    'When the current window ends, as absolute Unix time in seconds (not a countdown).',
    Type.Integer({ minimum: 0 }),
    1767229200,
  ),
  retryAfter: header(
    'Retry-After',
    'Whole seconds to wait before retrying.',
    Type.Integer({ minimum: 1 }),
    120,
  ),
  etag: header(
    'ETag',
    'Strong validator of the body: send it back in `If-None-Match` to get a 304 that does not count.',
    Type.String(),
    '"Zy7nW2kxv1QoJ3pY9bF0aHcT5uE8rLmD4sK6gN1iVxA"',
  ),
  requestId: header(
    'X-Request-Id',
    "Identifies this request in the service's logs: the caller's own `X-Request-Id` when it is plain and not shaped like a secret, else a new UUID.",
    Type.String(),
    '5b0e6c1e-3f4a-4d2b-9c8e-7a1f2d3e4b5c',
  ),
  changesCursor: header(
    'X-Changes-Cursor',
    'The changes-feed position of the snapshot: pass it as `cursor` to `/changes` to continue from it.',
    Type.String(),
    'AQAAAAAAAAAAAAAARmnB0FB6e0d4c2k9Zm8yQ1J3SW1Pcw',
  ),
  location: header(
    'Location',
    'Where the browser goes next: the sign-in and consent pages, or back to the client with the result.',
    Type.String({ format: 'uri-reference' }),
    '/integration/v1/oauth2/interaction/Jk3bA0yq6Xo1c8h4mZ2sR',
  ),
  wwwAuthenticate: header(
    'WWW-Authenticate',
    'The bearer challenge (RFC 6750); names the error when a credential was sent.',
    Type.String(),
    'Bearer realm="safety-api", error="invalid_token"',
  ),
} satisfies Record<string, HeaderDoc>;

/** One body of a response in a media type other than the JSON of `schema.response`. */
export interface MediaDoc {
  schema: TSchema;
  example: unknown;
}

export interface ResponseDoc {
  /** Defaults to the status's reason phrase. */
  description?: string;
  headers?: HeaderDoc[];
  /** Named examples of the JSON body that `schema.response` gives for this status. */
  examples?: Record<string, unknown>;
  /** Bodies in other media types (CSV, NDJSON…), by media type. */
  content?: Record<string, MediaDoc>;
}

export interface OperationDoc {
  /**
   * By status. A status here without a `schema.response` entry and without `content` has no
   * body (a 304), and is documented as such.
   */
  responses?: Record<number, ResponseDoc>;
  /**
   * The operations this route hands over to a server of its own (the OAuth provider, mounted
   * behind one wildcard route), each declared as its own route would be. The document lists
   * these instead of the route itself.
   */
  delegated?: DelegatedRoute[];
}

/**
 * An operation answered behind another route. Nothing validates or serializes through its
 * `schema`: it says what the other server takes and answers (`body` as Fastify writes a body per
 * media type, `{ content: { <media type>: { schema } } }`).
 */
export interface DelegatedRoute {
  method: HTTPMethods;
  url: string;
  schema: FastifySchema;
  config: { openapi: OperationDoc };
}

declare module 'fastify' {
  /** What a route's `schema` says of its operation in the document, besides its JSON bodies. */
  interface FastifySchema {
    operationId?: string;
    /** One of TAGS. */
    tags?: string[];
    summary?: string;
    description?: string;
    /** Its credential, when more precise than its surface's (an OAuth scope). */
    security?: Record<string, string[]>[];
  }

  interface FastifyContextConfig {
    /** The route's part of the OpenAPI document (src/schemas/openapi.ts). */
    openapi?: OperationDoc;
  }
}

/** The answer of a cached read to an `If-None-Match` naming the current ETag. */
export const NOT_MODIFIED: ResponseDoc = {
  description:
    'Not modified: `If-None-Match` names the current ETag. No body, and not counted against the allowance.',
  headers: [HEADERS.etag],
};

/**
 * Tags the operations are grouped by, with what each group holds, in the order the document lists
 * them. A route's tag must be one of these.
 */
export const TAGS = {
  incidents: { name: 'Incidents', description: "Safety incidents of the API key's account, newest first." },
  directory: {
    name: 'Directory',
    description: "The account's active users, departments and locations, by name.",
  },
  changes: {
    name: 'Changes',
    description:
      'Every change to the public data, deletions included, oldest first and each record once in its latest state: a replica stays in sync by following `next_cursor`.',
  },
  exports: {
    name: 'Exports',
    description:
      'Whole data sets in one streamed NDJSON or CSV response from one snapshot, with the feed position to continue from.',
  },
  widerApi: {
    name: 'Wider API',
    description:
      'The lists of the wider API, read with OAuth 2 access tokens and paged with `_start` and `_limit`.',
  },
  oauth: {
    name: 'OAuth 2',
    description:
      'The authorization server that issues the access tokens of the wider API: authorization code with PKCE (S256), refresh tokens that rotate, client credentials, revocation, OpenID Connect userinfo and discovery. Its issuer is `/integration/v1/oauth2` on this host. A browser also passes through pages that are not operations: the sign-in and consent pages `/authorize` redirects to, and the sign-out confirmation of `/session/end`.',
  },
  health: {
    name: 'Health',
    description: 'Probes for load balancers and orchestrators: no credential, not counted, never cached.',
  },
  webhooks: {
    name: 'Webhooks',
    description:
      'The changes feed pushed: one signed POST per change to the endpoints a Super Admin registered, in feed order, retried with backoff until a 2xx (docs/webhooks.md). These are requests the service sends to your endpoint, not operations it serves.',
  },
} as const;

const componentNames = new WeakMap<object, string>();
const documentedParameters = new WeakMap<object, TSchema>();

/**
 * Names `schema` as `components.schemas[name]`: wherever a route schema uses this very object, the
 * document refers to the component instead of repeating it.
 */
export function component<T extends TSchema>(name: string, schema: T): T {
  componentNames.set(schema, name);
  return schema;
}

export function componentName(schema: object): string | undefined {
  return componentNames.get(schema);
}

/**
 * A parameter whose route schema admits more than the API documents, so that validation never
 * refuses it and the route normalizes it instead (the public lists never answer 400): the
 * document shows `documented`, the type, default and limits a client should send.
 */
export function documentedAs<T extends TSchema>(accepted: T, documented: TSchema): T {
  documentedParameters.set(accepted, documented);
  return accepted;
}

export function documentedParameter(accepted: object): TSchema | undefined {
  return documentedParameters.get(accepted);
}
