import type { components, webhooks } from './generated/openapi.ts';

/** The records of the public API, as the list endpoints, exports, the feed and webhooks render them. */
export type Incident = components['schemas']['Incident'];
export type User = components['schemas']['User'];
export type Department = components['schemas']['Department'];
export type Location = components['schemas']['Location'];
export type IncidentPagination = components['schemas']['IncidentPagination'];

/**
 * A page of the wider API's lists (`_start`/`_limit`): its records and the pagination of the whole
 * list. The next page starts at `pagination.start` + `pagination.perPage`.
 */
export interface Page<T> {
  response: T[];
  pagination: Pagination;
}
export type Pagination = components['schemas']['Pagination'];

/** The probes' answers: `/healthz` and `/readyz`. */
export type Liveness = components['schemas']['Liveness'];
export type Readiness = components['schemas']['Readiness'];

/** What the OAuth 2 authorization server answers. */
export type TokenSet = components['schemas']['TokenResponse'];
export type UserInfo = components['schemas']['UserInfo'];
export type OpenIdConfiguration = components['schemas']['OpenIdConfiguration'];
export type JsonWebKeySet = components['schemas']['JsonWebKeySet'];

/** One change of the changes feed: `type` tells which record `object` is (null on a `delete`). */
export type Change = components['schemas']['ChangesPage']['data'][number];
export type ChangesPage = components['schemas']['ChangesPage'];

/** Every webhook event the service sends, told apart by `type`. */
export type WebhookEvent = {
  [Type in keyof webhooks]: webhooks[Type]['post']['requestBody']['content']['application/json'];
}[keyof webhooks];

/** The four kinds of record, by their name in the changes feed and in webhook events. */
export type RecordType = Change['type'];

/** A record with its kind: what `sync()` hands to `onRecord`. */
export type TypedRecord =
  | { type: 'incident'; object: Incident }
  | { type: 'user'; object: User }
  | { type: 'department'; object: Department }
  | { type: 'location'; object: Location };

/**
 * `X-RateLimit-Limit` and `X-RateLimit-Remaining` (the hourly allowance and what is left of it) and
 * `X-RateLimit-Reset` (Unix seconds when the window resets; null on a 429, which does not send it).
 */
export interface RateLimit {
  limit: number;
  remaining: number;
  reset: number | null;
}

/** What every call returns: the body's `data`, with the headers an integrator acts on. */
export interface ApiResult<T> {
  data: T;
  /** Null only on an answer that was not counted against the allowance. */
  rateLimit: RateLimit | null;
  /** `X-Request-Id`: quote it when asking for support. */
  requestId: string | null;
}
