import type { ColumnType, Generated } from 'kysely';

/**
 * Table types shared by both stores. Timestamps are ISO 8601 UTC strings with milliseconds
 * (`2026-01-02T03:04:05.000Z`) and booleans are 0/1 integers in SQLite and PostgreSQL alike, so
 * that one set of repositories reads both stores without conversion.
 */

type Flag = ColumnType<number, number | undefined, number>;

/**
 * Where a public record's latest change sits in its account's changes feed: the seq the writer
 * gave it (after the account's `data_version`) and when.
 */
interface ChangeColumns {
  change_seq: ColumnType<number, number | undefined, number>;
  changed_at: ColumnType<string, string | undefined, string>;
}

/** The change columns of a record in the public view (a tombstone has only its change's place). */
interface RecordChangeColumns extends ChangeColumns {
  /**
   * The seq at which the record last entered the public view (inserted, or back after a deletion):
   * a webhook receiver knows the record in this life only if it was sent it since then
   * (`WebhookEndpointsTable.known_through`, `WebhookAcknowledgedTable`).
   */
  created_seq: ColumnType<number, number | undefined, number>;
}

export interface AccountsTable {
  id: string;
  name: string;
  api_access: Flag;
  rate_limit_per_hour: ColumnType<number, number | undefined, number>;
  /** Number of incidents, maintained by imports so that `total` never costs a COUNT(*). */
  incident_count: ColumnType<number, number | undefined, number>;
  /**
   * The seq of the account's last change: every writer of its public data numbers its changes
   * after it and moves it on in the same transaction. Part of response cache keys and ETags, and
   * the head of the changes feed.
   */
  data_version: ColumnType<number, number | undefined, number>;
  /** The last seq of a tombstone purged after CHANGES_RETENTION_DAYS: a cursor below it is expired. */
  changes_purged_seq: ColumnType<number, number | undefined, number>;
  created_at: string;
  updated_at: string;
}

export interface DepartmentsTable extends RecordChangeColumns {
  id: string;
  account_id: string;
  name: string;
  active: Flag;
  created_at: string;
}

export type LocationsTable = DepartmentsTable;

export interface UsersTable extends RecordChangeColumns {
  id: string;
  account_id: string;
  name: string;
  email: string;
  role: string;
  department: string | null;
  job_title: string | null;
  active: Flag;
  vendor_support: Flag;
  password_hash: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: string;
}

export interface IncidentsTable extends RecordChangeColumns {
  id: string;
  account_id: string;
  incident_number: string;
  description: string | null;
  status: string;
  severity_likelihood: number | null;
  severity_impact: number | null;
  location: string | null;
  incident_date: string | null;
  created_at: string;
  updated_at: string;
  /**
   * The incident's place in its account's (created_at, id) order, ascending from 1. Positions are
   * dense except where deletions left holes, which `incident_blocks` counts per block, so any page
   * is a range lookup on (account_id, position) (docs/architecture.md).
   */
  position: ColumnType<number, number | undefined, number>;
}

/** A deleted incident, kept in the changes feed for CHANGES_RETENTION_DAYS. */
export interface IncidentTombstonesTable extends ChangeColumns {
  id: string;
  account_id: string;
}

/** A block of incident positions that lost rows to deletions, and how many it still holds. */
export interface IncidentBlocksTable {
  account_id: string;
  block: number;
  live: number;
}

export interface ApiKeysTable {
  id: string;
  account_id: string;
  name: string;
  prefix: string;
  key_hash: string;
  scope: string;
  /** `active`, `disabled` or `revoked`; `expired` is derived from `expires_at`. */
  state: string;
  expires_at: string | null;
  last_used_at: ColumnType<string | null, string | null | undefined, string | null>;
  created_by: string | null;
  created_at: string;
  updated_at: string;
  /** The key this one replaced in a roll, and the key that replaced it. */
  rolled_from: ColumnType<string | null, string | null | undefined, string | null>;
  rolled_to: ColumnType<string | null, string | null | undefined, string | null>;
}

/** Requests per key and hour, summed over every instance (`KeyUsageRecorder`); kept 30 days. */
export interface KeyUsageTable {
  key_id: string;
  /** ISO 8601 start of the hour (UTC). */
  hour: string;
  ok: number;
  client_errors: number;
  rate_limited: number;
}

/** The audit trail: every change a Super Admin or the CLI made to a key or a webhook endpoint. */
export interface AuditEventsTable {
  id: Generated<number>;
  account_id: string;
  /** What was changed: `api_key` or `webhook_endpoint`. */
  subject_type: ColumnType<string, string | undefined, string>;
  subject_id: string;
  /** Who acted: a user id, or `cli` for the command line. */
  actor: string;
  action: string;
  detail: string | null;
  created_at: string;
}

export interface AdminSessionsTable {
  /** SHA-256 (hex) of the session id; the raw id exists only in the browser's cookie. */
  id_hash: string;
  user_id: string;
  account_id: string;
  csrf_token: string;
  /** A one-time message for the next page, encrypted with a key derived from the raw session id. */
  flash: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: string;
  last_seen_at: string;
  /** Absolute end of the session, whatever its activity. */
  expires_at: string;
}

export interface OauthClientsTable {
  client_id: string;
  account_id: string;
  name: string;
  /** JSON array of the registered redirect URIs. */
  redirect_uris: string;
  is_public: Flag;
  /** SHA-256 (hex) of the client secret; null for a public client. */
  secret_hash: string | null;
  created_at: string;
  /** After a rotation: the old secret's hash, accepted until `previous_secret_expires_at`. */
  previous_secret_hash: ColumnType<string | null, string | null | undefined, string | null>;
  previous_secret_expires_at: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface OauthPayloadsTable {
  /** oidc-provider model name: AccessToken, RefreshToken, Grant, Session, Interaction, … */
  model: string;
  /** The model's id, or for bearer models (tokens, codes, sessions) the SHA-256 of it (hex). */
  id: string;
  /** The model's payload as JSON text, never holding a bearer model's raw id. */
  payload: string;
  grant_id: string | null;
  user_code: string | null;
  uid: string | null;
  expires_at: string | null;
  /** The user the record acts for (the payload's accountId), so a new password can end them all. */
  user_id: string | null;
  consumed_at: ColumnType<string | null, string | null | undefined, string | null>;
  /** The client the record was issued to (payload `clientId`): lists a client's grants. */
  client_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** On a Grant row: when a token of it was last issued or presented. */
  last_used_at: ColumnType<string | null, string | null | undefined, string | null>;
}

/** A URL that receives an account's changes feed as signed POSTs (docs/design.md, "Webhooks"). */
export interface WebhookEndpointsTable {
  id: string;
  account_id: string;
  url: string;
  description: string | null;
  /** JSON array of event types and wildcards (`incident.*`, `*`), in canonical form (`canonicalFilter`). */
  events: string;
  /** `active` or `disabled`. */
  state: string;
  disabled_reason: string | null;
  /** The signing secret (`whsec_…`), encrypted (`services/webhook-secret-box.ts`). */
  secret: string;
  /** The secret before the last rotation, encrypted, signing beside the new one until it expires. */
  previous_secret: string | null;
  previous_secret_expires_at: string | null;
  /**
   * Every previous secret that may still sign, each with its own expiry: a JSON array of
   * `{ secret, expires_at }` (each secret encrypted), oldest rotation first; its newest entry is
   * `previous_secret`. Null before any rotation by a release that writes it (migration 0011).
   */
  previous_secrets: ColumnType<string | null, string | null | undefined, string | null>;
  /**
   * Null for every endpoint but those that already had the URL and event filter of an older one of
   * their account when one per URL and filter became the rule (migration 0012): the older one's id.
   * The unique index on (account, URL, events) leaves those out; an edit of their URL or events
   * clears it, and the edited endpoint is held to the rule like any other.
   */
  duplicate_of: ColumnType<string | null, string | null | undefined, string | null>;
  /** The seq of the last change delivered (or skipped by the filter): delivery goes on after it. */
  position: number;
  /**
   * The receiver knows every record in the view whose `created_seq` is at or before this seq (it was
   * sent a `created` or `updated` for it, or the record was in the view when the position was set
   * by hand): that record's changes are `updated`. Set with the position at creation, resend and
   * restart from latest; moved up to the position when a whole read of the feed was delivered.
   */
  known_through: number;
  /** When the change after `position` first failed; null while deliveries succeed. */
  failing_since: string | null;
  /** Failed attempts of the change after `position`: the retry schedule's step. */
  failed_attempts: ColumnType<number, number | undefined, number>;
  /** Not before this time is the change after `position` tried again. */
  next_attempt_at: string | null;
  last_attempt_at: string | null;
  last_status: number | null;
  /** The instance delivering for this endpoint, until `lease_expires_at`. */
  lease_owner: string | null;
  lease_expires_at: string | null;
  created_by: string;
  created_at: string;
  updated_at: string;
}

/**
 * The records an endpoint acknowledged (2xx), or whose event its filter left out, since they last
 * entered the view, among those that entered it after its `known_through`: their changes are
 * `updated`. Emptied when `known_through` moves up; the rows go with the endpoint.
 */
export interface WebhookAcknowledgedTable {
  endpoint_id: string;
  /** `incident`, `user`, `department` or `location`. */
  record_type: string;
  record_id: string;
  /** The record's `created_seq` when it was acknowledged: once the record left and came back, it differs. */
  created_seq: number;
}

/** One delivery attempt, kept for the endpoint's delivery log. */
export interface WebhookAttemptsTable {
  id: Generated<number>;
  endpoint_id: string;
  webhook_id: string;
  type: string;
  /** The change's seq; null for a test event. */
  seq: number | null;
  at: string;
  /** The HTTP status received, or null when no answer came (refused, timeout, network error). */
  status: number | null;
  duration_ms: number;
  error: string | null;
  /**
   * The request's headers as sent (JSON object; the signature, never a secret) and its body: null
   * for the attempts of releases before migration 0014.
   */
  request_headers: string | null;
  request_body: string | null;
  /** The answer's headers (JSON object) and the first 4 KiB of its body, as text; null when no answer came. */
  response_headers: string | null;
  response_body: string | null;
  /**
   * `success`, `http_error`, `gone`, `timeout`, `network_error` or `refused`; null for an attempt a
   * release before migration 0014 logged during a rolling upgrade (its status tells success).
   */
  outcome: string | null;
  /** The bytes the attempt holds in the log (headers, bodies, error): the log's bound in bytes. */
  size: Generated<number>;
}

/** Secrets the service generates once and shares between instances through the database. */
export interface GeneratedSecretsTable {
  /** `jwks` (OAuth token signing keys), `cookie_keys` (OAuth cookies), `changes_cursor` or
   * `webhook_secrets` (the key that encrypts webhook signing secrets when none is configured). */
  kind: string;
  /** JSON text. */
  value: string;
  created_at: string;
}

/**
 * The mails sent to Super Admins, one per event, under a key naming it (`services/mail-service.ts`):
 * claimed before the mail leaves, so that one instance sends it.
 */
export interface MailNoticesTable {
  key: string;
  account_id: string;
  created_at: string;
}

export interface Database {
  accounts: AccountsTable;
  departments: DepartmentsTable;
  locations: LocationsTable;
  users: UsersTable;
  incidents: IncidentsTable;
  incident_tombstones: IncidentTombstonesTable;
  incident_blocks: IncidentBlocksTable;
  api_keys: ApiKeysTable;
  key_usage: KeyUsageTable;
  audit_events: AuditEventsTable;
  admin_sessions: AdminSessionsTable;
  oauth_clients: OauthClientsTable;
  oauth_payloads: OauthPayloadsTable;
  generated_secrets: GeneratedSecretsTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_attempts: WebhookAttemptsTable;
  webhook_acknowledged: WebhookAcknowledgedTable;
  mail_notices: MailNoticesTable;
}
