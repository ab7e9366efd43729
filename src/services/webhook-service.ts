import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { accountRepository } from '../db/repositories/accounts.ts';
import { type AuditEventRow, auditRepository } from '../db/repositories/audit-events.ts';
import { changeRepository } from '../db/repositories/changes.ts';
import { notifyWebhooks } from '../db/repositories/notifications.ts';
import {
  ATTEMPTS_KEPT,
  type AttemptFilter,
  attemptLogCutoff,
  type EndpointPatch,
  type WebhookAttemptRow,
  type WebhookEndpointRow,
  webhookRepository,
} from '../db/repositories/webhooks.ts';
import type { Database } from '../db/schema.ts';
import { InputError } from '../errors.ts';
import { requireApiAccess } from './account-plan.ts';
import { type AttemptOutcome, outcomeOf } from '../webhooks/attempt.ts';
import {
  attemptLogRow,
  legacyOutcome,
  LOGGED_OUTCOMES,
  type LoggedOutcome,
} from '../webhooks/delivery-log.ts';
import { matchesFilter, parseEventFilter, TEST_EVENT_TYPE } from '../webhooks/events.ts';
import { fetchBatch, type Known, knows } from '../webhooks/fetch-batch.ts';
import { type OutboundClient, outboundHeaders, type PostResult } from '../webhooks/outbound.ts';
import { type EventChange, eventType, testEventBody } from '../webhooks/payload.ts';
import { newProgress, passed } from '../webhooks/record-outcome.ts';
import {
  changeWebhookId,
  generateSecret,
  signedHeaders,
  signingKeys,
  testWebhookId,
} from '../webhooks/signing.ts';
import { type ChangeFeedService, LATEST_CURSOR } from './change-feed-service.ts';
import { isStorableText } from '../lib/storable-text.ts';
import { storableText } from './input-text.ts';
import { type SecretBox, secretBoxOf } from './webhook-secret-box.ts';

/**
 * Webhook endpoints, shared by the CLI and the admin panel (docs/design.md, "Webhooks"): every change
 * is validated here, written with its audit event in one transaction, and heard by the delivering
 * instance at once (a NOTIFY on PostgreSQL, the commit watch on SQLite). Changes that move the
 * endpoint's position or state also end the current holder's lease, so that the delivery loop
 * starts again from the stored state instead of writing over it.
 */

/** What the service is built with: the database, the guarded HTTP client, the secrets' key, its feed. */
export interface WebhookServiceOptions {
  db: Kysely<Database>;
  outbound: OutboundClient;
  /** WEBHOOK_SECRETS_KEY, or null for the key kept in the database. */
  secretsKey: Buffer | null;
  /** WEBHOOK_MAX_ENDPOINTS: the most endpoints one account may have. */
  maxEndpoints: number;
  /** The same database's feed: its cursors are the endpoints' positions as clients see them. */
  changeFeed: ChangeFeedService;
}

export type EndpointState = 'active' | 'disabled';

/** An endpoint as the CLI (`--json`) and the panel show it; never its secret. */
export interface WebhookEndpointView {
  id: string;
  account_id: string;
  url: string;
  description: string | null;
  events: string[];
  state: EndpointState;
  disabled_reason: string | null;
  /** A `/changes` cursor at the last delivered position. */
  cursor: string;
  /** The seq of the last change delivered. */
  position: number;
  /** Changes in the feed after the position: an upper bound of the events still to send. */
  lag: number;
  /** Whether the position is older than the feed keeps (CHANGES_RETENTION_DAYS): resend from latest. */
  past_retention: boolean;
  last_attempt_at: string | null;
  last_status: number | null;
  failing_since: string | null;
  next_attempt_at: string | null;
  /** While a rotation's overlap lasts: when the last previous secret stops signing (only the current one signs after). */
  previous_secret_expires_at: string | null;
  /** When each previous secret that still signs stops signing, soonest first. */
  previous_secrets_expire_at: string[];
  created_by: string;
  created_at: string;
}

/**
 * An attempt of the delivery log as the CLI (`show --json`) and the panel show it: the request as
 * sent (the signature, never a secret) and the answer with at most 4 KiB of its body. `request` and
 * `response` are null for attempts logged before they were kept (migration 0014); `response` is
 * null when no answer came.
 */
export interface WebhookAttemptView {
  /** The attempt's number in the log (the panel's link to it). */
  id: number;
  webhook_id: string;
  type: string;
  seq: number | null;
  at: string;
  status: number | null;
  duration_ms: number;
  error: string | null;
  outcome: LoggedOutcome;
  request: { headers: Record<string, string>; body: string } | null;
  response: { status: number; headers: Record<string, string | string[]>; body: string } | null;
}

/** The event an endpoint is stuck on: what its next attempt sends, while it is failing. */
export interface StuckEvent {
  webhook_id: string;
  type: string;
  seq: number;
  /** The record's id (`data.id`). */
  record_id: string;
}

/** A redelivery: the receiver's answer, as `sendTest`'s, with the event it sent again. */
export type Redelivery = PostResult & { webhook_id: string; type: string; outcome: AttemptOutcome };

/** Who acted: a user id, `cli`, or `system` (the delivery loop disabling an endpoint). */
export type Actor = string;

export const DEFAULT_OVERLAP_HOURS = 24;
const MAX_OVERLAP_HOURS = 24 * 30;
/**
 * Previous secrets kept at once, each signing until its own expiry: a rotation past it ends the one
 * that would expire soonest (the signature header grows by one signature per secret).
 */
export const MAX_PREVIOUS_SECRETS = 10;
const MAX_DESCRIPTION_LENGTH = 200;
/** Attempts `show` lists, unless asked for another number (at most ATTEMPTS_KEPT). */
export const ATTEMPTS_SHOWN = 50;

/** What `--outcome` (and the panel's filter) takes: success, any failure, or one kind of failure. */
export const OUTCOME_FILTERS: readonly string[] = [
  'success',
  'failure',
  ...LOGGED_OUTCOMES.filter((outcome) => outcome !== 'success'),
];

/** Which attempts `show` lists: by outcome, by event type, how many. */
export interface AttemptQuery {
  outcome?: string;
  type?: string;
  limit?: string | number;
}

/** An `AttemptQuery` checked: an InputError names what is wrong in one line. */
export function parseAttemptQuery(query: AttemptQuery): { filter: AttemptFilter; limit: number } {
  const filter: AttemptFilter = {};
  const outcome = query.outcome?.trim() ?? '';
  if (outcome !== '') {
    if (!OUTCOME_FILTERS.includes(outcome))
      throw new InputError(`outcome must be one of ${OUTCOME_FILTERS.join(', ')} (got "${query.outcome}")`);
    filter.outcome = outcome;
  }
  if ((query.type?.trim() ?? '') !== '') filter.types = parseEventFilter(query.type);
  let limit = ATTEMPTS_SHOWN;
  if (query.limit !== undefined && query.limit !== '') {
    const text = String(query.limit).trim();
    limit = /^\d{1,7}$/.test(text) ? Number(text) : Number.NaN;
    if (!(limit >= 1 && limit <= ATTEMPTS_KEPT))
      throw new InputError(`limit must be a whole number from 1 to ${ATTEMPTS_KEPT} (got "${query.limit}")`);
  }
  return { filter, limit };
}

function parseJsonObject<T>(text: string | null): T | null {
  if (text === null) return null;
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as T) : null;
  } catch {
    return null;
  }
}

function attemptView(row: WebhookAttemptRow): WebhookAttemptView {
  const requestHeaders = parseJsonObject<Record<string, string>>(row.request_headers);
  const responseHeaders = parseJsonObject<Record<string, string | string[]>>(row.response_headers);
  return {
    id: row.id,
    webhook_id: row.webhook_id,
    type: row.type,
    seq: row.seq,
    at: row.at,
    status: row.status,
    duration_ms: row.duration_ms,
    error: row.error,
    outcome: (LOGGED_OUTCOMES as readonly string[]).includes(row.outcome ?? '')
      ? (row.outcome as LoggedOutcome)
      : legacyOutcome(row.status, row.error),
    request:
      requestHeaders === null || row.request_body === null
        ? null
        : { headers: requestHeaders, body: row.request_body },
    response:
      row.status === null || responseHeaders === null
        ? null
        : { status: row.status, headers: responseHeaders, body: row.response_body ?? '' },
  };
}

async function toView(
  changeFeed: ChangeFeedService,
  row: WebhookEndpointRow,
  feed: { head: number; purgedSeq: number },
  now: Date,
): Promise<WebhookEndpointView> {
  const expiries = livePrevious(row, now)
    .map((previous) => previous.expires_at)
    .sort((a, b) => Date.parse(a) - Date.parse(b));
  return {
    id: row.id,
    account_id: row.account_id,
    url: row.url,
    description: row.description,
    events: JSON.parse(row.events) as string[],
    state: row.state as EndpointState,
    disabled_reason: row.disabled_reason,
    cursor: await changeFeed.cursorAfter(row.account_id, row.position),
    position: row.position,
    lag: Math.max(0, feed.head - row.position),
    past_retention: row.position < feed.purgedSeq,
    last_attempt_at: row.last_attempt_at,
    last_status: row.last_status,
    failing_since: row.failing_since,
    next_attempt_at: row.next_attempt_at,
    previous_secret_expires_at: expiries.at(-1) ?? null,
    previous_secrets_expire_at: expiries,
    created_by: row.created_by,
    created_at: row.created_at,
  };
}

async function requireEndpoint(
  db: Kysely<Database>,
  endpointId: string,
  accountId?: string,
): Promise<WebhookEndpointRow> {
  // An id no endpoint can have (`isStorableText`) is looked up in no store.
  const row = isStorableText(endpointId) ? await webhookRepository.findById(db, endpointId) : undefined;
  // Another account's endpoint is reported exactly like a missing one.
  if (row === undefined || (accountId !== undefined && row.account_id !== accountId))
    throw new InputError(`no webhook endpoint with id "${endpointId}"`);
  return row;
}

async function feedOf(db: Kysely<Database>, accountId: string): Promise<{ head: number; purgedSeq: number }> {
  return (await changeRepository.feedState(db, accountId)) ?? { head: 0, purgedSeq: 0 };
}

function parseDescription(value: string | undefined | null): string | null {
  const description = (value ?? '').trim();
  if (description === '') return null;
  if (description.length > MAX_DESCRIPTION_LENGTH)
    throw new InputError(`description must be at most ${MAX_DESCRIPTION_LENGTH} characters`);
  return storableText('description', description);
}

export function parseOverlapHours(value: string | number | undefined): number {
  if (value === undefined || value === '') return DEFAULT_OVERLAP_HOURS;
  const hours = typeof value === 'number' ? value : /^\d+(\.\d+)?$/.test(value) ? Number(value) : Number.NaN;
  if (!(hours >= 0 && hours <= MAX_OVERLAP_HOURS))
    throw new InputError(`overlap must be a number of hours from 0 to ${MAX_OVERLAP_HOURS} (got "${value}")`);
  return hours;
}

/**
 * A position set by hand (creation, resend, restart from latest): the receiver counts as knowing
 * exactly the records that entered the view up to it; those that entered it later are `created`
 * when their turn comes (docs/webhooks.md, "Events").
 */
function restartAt(position: number): { position: number; known_through: number } {
  return { position, known_through: position };
}

/**
 * Writes `patch` and its audit event in one transaction, then wakes the deliveries. `releaseLease`:
 * the change moves the position or the state, or what the deliveries send to (URL, filter), so the
 * holder must start again from the stored row. A patch that sets the floor (`restartAt`) also
 * forgets what the endpoint acknowledged past it. `check`, if any, runs first in the transaction and
 * may refuse the change (an `InputError`), which then writes nothing.
 */
async function change(
  db: Kysely<Database>,
  row: WebhookEndpointRow,
  patch: Omit<EndpointPatch, 'updated_at'>,
  audit: { actor: Actor; action: string; detail: string | null },
  { releaseLease, check }: { releaseLease: boolean; check?: (trx: Kysely<Database>) => Promise<void> },
): Promise<void> {
  const stamp = new Date().toISOString();
  await db.transaction().execute(async (trx) => {
    await check?.(trx);
    await webhookRepository.update(trx, row.id, {
      ...patch,
      ...(releaseLease ? { lease_owner: null, lease_expires_at: null } : {}),
      updated_at: stamp,
    });
    if (patch.known_through !== undefined) await webhookRepository.forgetAcknowledged(trx, row.id);
    await auditRepository.insert(trx, {
      account_id: row.account_id,
      subject_type: 'webhook_endpoint',
      subject_id: row.id,
      actor: audit.actor,
      action: audit.action,
      detail: audit.detail,
      created_at: stamp,
    });
    await notifyWebhooks(trx, '*');
  });
}

/**
 * Refuses a second endpoint of the account with this URL and (canonical) filter; run under
 * `lockAccountEndpoints`, and backed by the store's unique index (migration 0012).
 */
async function requireNewTarget(
  trx: Kysely<Database>,
  target: { accountId: string; url: string; events: string },
  exceptId?: string,
): Promise<void> {
  const existing = await webhookRepository.findByTarget(trx, target, exceptId);
  if (existing !== undefined)
    throw new InputError(
      `the account already has a webhook endpoint for this URL and these events (${existing.id}): edit or delete that one instead`,
    );
}

function filterText(events: string): string {
  return (JSON.parse(events) as string[]).join(',');
}

function descriptionText(description: string | null): string {
  return description === null ? 'none' : `"${description}"`;
}

/** The retry state of an endpoint that starts (again) with a clean slate. */
const NOT_FAILING = { failing_since: null, failed_attempts: 0, next_attempt_at: null } as const;

/**
 * The webhook endpoints of one database. Keeps the signing secrets' box, loaded (or generated) at its
 * first use.
 */
export class WebhookService {
  private readonly db: Kysely<Database>;
  private readonly outbound: OutboundClient;
  private readonly maxEndpoints: number;
  private readonly changeFeed: ChangeFeedService;
  private readonly secrets: () => Promise<SecretBox>;

  constructor({ db, outbound, secretsKey, maxEndpoints, changeFeed }: WebhookServiceOptions) {
    this.db = db;
    this.outbound = outbound;
    this.maxEndpoints = maxEndpoints;
    this.changeFeed = changeFeed;
    this.secrets = secretBoxOf(db, secretsKey);
  }

  async create(input: {
    accountId: string;
    url: string;
    events?: string | string[];
    description?: string;
    actor: Actor;
  }): Promise<{ endpoint: WebhookEndpointView; secret: string }> {
    await requireApiAccess(this.db, input.accountId);
    const events = parseEventFilter(input.events);
    const description = parseDescription(input.description);
    const url = await this.outbound.checkUrl(input.url);

    const id = randomUUID();
    const secret = generateSecret();
    const sealed = (await this.secrets()).seal(id, secret);
    const now = new Date();
    const stamp = now.toISOString();
    await this.db.transaction().execute(async (trx) => {
      await webhookRepository.lockAccountEndpoints(trx, input.accountId);
      const count = await webhookRepository.countByAccount(trx, input.accountId);
      if (count >= this.maxEndpoints)
        throw new InputError(
          `the account already has ${count} webhook endpoints, the most it may have (WEBHOOK_MAX_ENDPOINTS=${this.maxEndpoints}): delete one before adding another`,
        );
      await requireNewTarget(trx, { accountId: input.accountId, url, events: JSON.stringify(events) });
      // A new endpoint starts at the feed's head: it gets the changes made after its creation.
      const head = (await changeRepository.feedState(trx, input.accountId))?.head ?? 0;
      await webhookRepository.insert(trx, {
        id,
        account_id: input.accountId,
        url,
        description,
        events: JSON.stringify(events),
        state: 'active',
        disabled_reason: null,
        secret: sealed,
        previous_secret: null,
        previous_secret_expires_at: null,
        previous_secrets: null,
        duplicate_of: null,
        ...restartAt(head),
        failing_since: null,
        failed_attempts: 0,
        next_attempt_at: null,
        last_attempt_at: null,
        last_status: null,
        lease_owner: null,
        lease_expires_at: null,
        created_by: input.actor,
        created_at: stamp,
        updated_at: stamp,
      });
      await auditRepository.insert(trx, {
        account_id: input.accountId,
        subject_type: 'webhook_endpoint',
        subject_id: id,
        actor: input.actor,
        action: 'created',
        detail: `url ${url}, events ${events.join(',')}`,
        created_at: stamp,
      });
      await notifyWebhooks(trx, '*');
    });
    const row = await requireEndpoint(this.db, id);
    return {
      endpoint: await toView(this.changeFeed, row, await feedOf(this.db, input.accountId), now),
      secret,
    };
  }

  async list(accountId: string): Promise<WebhookEndpointView[]> {
    const account = await accountRepository.findById(this.db, accountId);
    if (account === undefined) throw new InputError(`no account with id "${accountId}"`);
    const feed = await feedOf(this.db, accountId);
    const now = new Date();
    const rows = await webhookRepository.listByAccount(this.db, accountId);
    return Promise.all(rows.map((row) => toView(this.changeFeed, row, feed, now)));
  }

  /**
   * The endpoint with its latest attempts, newest first: the last ATTEMPTS_SHOWN, or those `query`
   * asks for (by outcome, by event type, how many).
   */
  async show(
    endpointId: string,
    accountId?: string,
    query: AttemptQuery = {},
  ): Promise<WebhookEndpointView & { attempts: WebhookAttemptView[] }> {
    const { filter, limit } = parseAttemptQuery(query);
    const row = await requireEndpoint(this.db, endpointId, accountId);
    const now = new Date();
    const view = await toView(this.changeFeed, row, await feedOf(this.db, row.account_id), now);
    const rows = await webhookRepository.listAttempts(this.db, row.id, limit, {
      ...filter,
      since: attemptLogCutoff(now),
    });
    return { ...view, attempts: rows.map(attemptView) };
  }

  /** One attempt of the endpoint's delivery log, with its request and answer. */
  async attempt(
    endpointId: string,
    attemptId: string | number,
    accountId?: string,
  ): Promise<WebhookAttemptView> {
    const row = await requireEndpoint(this.db, endpointId, accountId);
    const id =
      typeof attemptId === 'number' ? attemptId : /^\d{1,15}$/.test(attemptId) ? Number(attemptId) : 0;
    const found =
      id > 0
        ? await webhookRepository.findAttempt(this.db, row.id, id, attemptLogCutoff(new Date()))
        : undefined;
    if (found === undefined)
      throw new InputError(
        `the delivery log of webhook endpoint "${endpointId}" has no attempt ${attemptId}`,
      );
    return attemptView(found);
  }

  /** The endpoint's audit events, newest first. */
  async history(endpointId: string, accountId: string, limit: number): Promise<AuditEventRow[]> {
    return auditRepository.list(this.db, accountId, limit, { type: 'webhook_endpoint', id: endpointId });
  }

  /**
   * Edits an endpoint's URL, event filter or description; its secrets, position and state stay, and
   * so does its retry state unless the URL changes (the failures were the old receiver's). A new
   * URL is checked as a new endpoint's is, and a new URL or filter may not repeat another endpoint's
   * of the account. When either changes, the holder of the lease lets it go, so that deliveries
   * start again from the stored row: the next attempt goes to the new URL, through the new filter.
   */
  async update(
    endpointId: string,
    actor: Actor,
    edit: { url?: string; events?: string | string[]; description?: string; accountId?: string },
  ): Promise<WebhookEndpointView & { attempts: WebhookAttemptView[] }> {
    const row = await requireEndpoint(this.db, endpointId, edit.accountId);
    if (edit.url === undefined && edit.events === undefined && edit.description === undefined)
      throw new InputError('nothing to change: give a new URL, events or description');
    const events = edit.events === undefined ? row.events : JSON.stringify(parseEventFilter(edit.events));
    const description = edit.description === undefined ? row.description : parseDescription(edit.description);
    const url = edit.url === undefined ? row.url : await this.outbound.checkUrl(edit.url);
    const changed = [
      ...(url === row.url ? [] : [`url ${row.url} → ${url}`]),
      ...(events === row.events ? [] : [`events ${filterText(row.events)} → ${filterText(events)}`]),
      ...(description === row.description
        ? []
        : [`description ${descriptionText(row.description)} → ${descriptionText(description)}`]),
    ];
    if (changed.length === 0)
      throw new InputError(
        'nothing to change: the endpoint already has this URL, these events and this description',
      );
    const retargeted = url !== row.url || events !== row.events;
    await change(
      this.db,
      row,
      {
        url,
        events,
        description,
        ...(retargeted ? { duplicate_of: null } : {}),
        // The failures were the old receiver's: the new one is tried at once, on a clean slate.
        ...(url === row.url ? {} : NOT_FAILING),
      },
      { actor, action: 'updated', detail: changed.join('; ') },
      {
        releaseLease: retargeted,
        check: async (trx) => {
          if (!retargeted) return;
          await webhookRepository.lockAccountEndpoints(trx, row.account_id);
          await requireNewTarget(trx, { accountId: row.account_id, url, events }, row.id);
        },
      },
    );
    return this.show(row.id);
  }

  async disable(
    endpointId: string,
    actor: Actor,
    { accountId, reason }: { accountId?: string; reason?: string } = {},
  ): Promise<WebhookEndpointView> {
    const row = await requireEndpoint(this.db, endpointId, accountId);
    if (row.state === 'disabled')
      throw new InputError(`the webhook endpoint "${endpointId}" is already disabled`);
    const disabledReason = reason ?? `disabled by ${actor === 'cli' ? 'the command line' : 'a Super Admin'}`;
    await change(
      this.db,
      row,
      { state: 'disabled', disabled_reason: disabledReason },
      { actor, action: 'disabled', detail: disabledReason },
      { releaseLease: true },
    );
    return this.show(endpointId);
  }

  /**
   * Enables a disabled endpoint: delivery resumes after its position, with a clean retry slate.
   * A position the feed no longer holds (older than CHANGES_RETENTION_DAYS) would skip deletions
   * silently: refused unless `fromLatest` says, deliberately, to restart at the feed's head.
   */
  async enable(
    endpointId: string,
    actor: Actor,
    { accountId, fromLatest = false }: { accountId?: string; fromLatest?: boolean } = {},
  ): Promise<WebhookEndpointView> {
    const row = await requireEndpoint(this.db, endpointId, accountId);
    if (row.state === 'active')
      throw new InputError(`the webhook endpoint "${endpointId}" is already active`);
    await requireApiAccess(this.db, row.account_id);
    const feed = await feedOf(this.db, row.account_id);
    const past = row.position < feed.purgedSeq;
    if (past && !fromLatest) {
      throw new InputError(
        `the webhook endpoint "${endpointId}" stopped at a position the changes feed no longer holds ` +
          '(older than CHANGES_RETENTION_DAYS): restart it from the head with ' +
          `"safety-api webhooks resend ${endpointId} --cursor latest", then enable it`,
      );
    }
    await change(
      this.db,
      row,
      {
        state: 'active',
        disabled_reason: null,
        ...NOT_FAILING,
        ...(fromLatest ? restartAt(feed.head) : {}),
      },
      { actor, action: 'enabled', detail: fromLatest ? `restarted from the head (seq ${feed.head})` : null },
      { releaseLease: true },
    );
    return this.show(endpointId);
  }

  async delete(endpointId: string, actor: Actor, accountId?: string): Promise<void> {
    const row = await requireEndpoint(this.db, endpointId, accountId);
    const stamp = new Date().toISOString();
    await this.db.transaction().execute(async (trx) => {
      await webhookRepository.delete(trx, row.id);
      await auditRepository.insert(trx, {
        account_id: row.account_id,
        subject_type: 'webhook_endpoint',
        subject_id: row.id,
        actor,
        action: 'deleted',
        detail: `url ${row.url}`,
        created_at: stamp,
      });
      await notifyWebhooks(trx, '*');
    });
  }

  /**
   * A new secret, shown once; the current one keeps signing beside it for `overlapHours` (one more
   * signature in the header), so receivers can switch without missing an event. Earlier secrets
   * still in their own overlap keep signing until it ends; an overlap of 0 ends them all now (a
   * secret that leaked).
   */
  async rotateSecret(
    endpointId: string,
    actor: Actor,
    { overlapHours = DEFAULT_OVERLAP_HOURS, accountId }: { overlapHours?: number; accountId?: string } = {},
  ): Promise<{
    secret: string;
    previous_secret_expires_at: string | null;
    previous_secrets_expire_at: string[];
  }> {
    const row = await requireEndpoint(this.db, endpointId, accountId);
    const hours = parseOverlapHours(overlapHours);
    const box = await this.secrets();
    const secret = generateSecret();
    const now = new Date();
    const until = hours === 0 ? null : new Date(now.getTime() + hours * 3_600_000).toISOString();
    const earlier = until === null ? [] : livePrevious(row, now);
    // Past the cap, the earlier secrets that would expire soonest end now.
    while (earlier.length >= MAX_PREVIOUS_SECRETS) {
      const soonest = earlier.reduce((a, b) => (Date.parse(b.expires_at) < Date.parse(a.expires_at) ? b : a));
      earlier.splice(earlier.indexOf(soonest), 1);
    }
    const previous = until === null ? [] : [...earlier, { secret: row.secret, expires_at: until }];
    await change(
      this.db,
      row,
      {
        secret: box.seal(row.id, secret),
        // The newest previous secret, for the previous release during a rolling upgrade.
        previous_secret: until === null ? null : row.secret,
        previous_secret_expires_at: until,
        previous_secrets: until === null ? null : JSON.stringify(previous),
      },
      {
        actor,
        action: 'secret rotated',
        detail:
          until === null
            ? 'no overlap'
            : `previous secret valid until ${until}${earlier.length === 0 ? '' : `; ${earlier.length} earlier secret${earlier.length === 1 ? '' : 's'} still signing, each until its own expiry`}`,
      },
      { releaseLease: false },
    );
    return {
      secret,
      previous_secret_expires_at: until,
      previous_secrets_expire_at: previous
        .map((entry) => entry.expires_at)
        .sort((a, b) => Date.parse(a) - Date.parse(b)),
    };
  }

  /**
   * Moves the position to `cursor` (a `/changes` cursor, or `latest` for the head): the changes
   * after it are sent again, in order, with the same `webhook-id`s as the first time.
   */
  async resend(
    endpointId: string,
    cursor: string,
    actor: Actor,
    accountId?: string,
  ): Promise<WebhookEndpointView> {
    const row = await requireEndpoint(this.db, endpointId, accountId);
    const feed = await feedOf(this.db, row.account_id);
    let position: number;
    if (cursor === LATEST_CURSOR) {
      position = feed.head;
    } else {
      const held = (await this.changeFeed.cursors()).decode(row.account_id, cursor.trim());
      if (held === null)
        throw new InputError(`cursor is not a /changes cursor of this account (got "${cursor}")`);
      if (held.bound > feed.head || held.position < feed.purgedSeq)
        throw new InputError(
          'cursor is older than the changes feed keeps (CHANGES_RETENTION_DAYS): use --cursor latest',
        );
      position = held.position;
    }
    await change(
      this.db,
      row,
      { ...restartAt(position), ...NOT_FAILING },
      {
        actor,
        action: 'resend',
        detail: `from seq ${position}${cursor === LATEST_CURSOR ? ' (latest)' : ''}`,
      },
      { releaseLease: true },
    );
    return this.show(endpointId);
  }

  /**
   * Sends a `webhook.test` event now, from this process, signed like any other, through the same
   * guard, whatever the endpoint's state; records it in the delivery log and returns what came back.
   */
  async sendTest(endpointId: string, accountId?: string): Promise<PostResult & { webhook_id: string }> {
    const row = await requireEndpoint(this.db, endpointId, accountId);
    // Nothing leaves for an account without API access, a test event no more than its changes.
    await requireApiAccess(this.db, row.account_id);
    const secrets = await this.signingSecrets(row, new Date());
    const head = (await feedOf(this.db, row.account_id)).head;
    const now = new Date();
    const body = testEventBody(
      row.id,
      now.toISOString(),
      await this.changeFeed.cursorAfter(row.account_id, head),
    );
    const webhookId = testWebhookId();
    const headers = {
      ...signedHeaders(webhookId, Math.floor(now.getTime() / 1000), body, signingKeys(secrets)),
    };
    const result = await this.outbound.post(row.url, headers, body);
    await webhookRepository.recordAttempts(this.db, [
      attemptLogRow({
        endpointId: row.id,
        webhookId,
        type: TEST_EVENT_TYPE,
        seq: null,
        at: now,
        request: { headers: outboundHeaders(headers), body },
        result,
        // A test event is logged whatever came of it, as it always was.
        outcome: loggedOutcome(outcomeOf(result)),
      }),
    ]);
    return { ...result, webhook_id: webhookId };
  }

  /**
   * Sends one event of the delivery log again, now, from this process: the same `webhook-id` and
   * body as logged, a new timestamp and signature (by the secrets that sign now), whatever the
   * endpoint's state and filter (but never for an account without API access). Logged as an attempt
   * and audited; the position does not move. An event the log no longer holds is refused.
   */
  async redeliver(
    endpointId: string,
    webhookId: string,
    actor: Actor,
    accountId?: string,
  ): Promise<Redelivery> {
    const row = await requireEndpoint(this.db, endpointId, accountId);
    const id = webhookId.trim();
    const logged =
      id !== '' && isStorableText(id)
        ? await webhookRepository.latestAttemptOf(this.db, row.id, id, attemptLogCutoff(new Date()))
        : undefined;
    if (logged?.request_body === null || logged?.request_body === undefined)
      throw new InputError(
        `the delivery log of webhook endpoint "${endpointId}" holds no event with webhook id "${webhookId}" ` +
          `(it keeps the last ${ATTEMPTS_KEPT} attempts of the last 30 days)`,
      );
    await requireApiAccess(this.db, row.account_id);
    const now = new Date();
    const body = logged.request_body;
    const keys = signingKeys(await this.signingSecrets(row, now));
    const headers = { ...signedHeaders(logged.webhook_id, Math.floor(now.getTime() / 1000), body, keys) };
    const result = await this.outbound.post(row.url, headers, body);
    const outcome = outcomeOf(result);
    // Not sent (no free connection in time): nothing happened to log or audit.
    if (outcome === 'not_sent')
      return { ...result, webhook_id: logged.webhook_id, type: logged.type, outcome };
    const answer = result.status === null ? (result.error ?? 'no answer') : `HTTP ${result.status}`;
    await this.db.transaction().execute(async (trx) => {
      await webhookRepository.recordAttempts(trx, [
        attemptLogRow({
          endpointId: row.id,
          webhookId: logged.webhook_id,
          type: logged.type,
          seq: logged.seq,
          at: now,
          request: { headers: outboundHeaders(headers), body },
          result,
          outcome,
        }),
      ]);
      await auditRepository.insert(trx, {
        account_id: row.account_id,
        subject_type: 'webhook_endpoint',
        subject_id: row.id,
        actor,
        action: 'redelivered',
        detail: `${logged.webhook_id} (${logged.type}${logged.seq === null ? '' : `, seq ${logged.seq}`}): ${answer}`,
        created_at: now.toISOString(),
      });
    });
    return { ...result, webhook_id: logged.webhook_id, type: logged.type, outcome };
  }

  /** The event the endpoint is stuck on (what its next attempt sends, while it fails), or null. */
  async stuckEvent(endpointId: string, accountId?: string): Promise<StuckEvent | null> {
    const row = await requireEndpoint(this.db, endpointId, accountId);
    if (row.failing_since === null) return null;
    const stuck = await this.stuckOn(row);
    return stuck === null ? null : stuckEventOf(row.id, stuck);
  }

  /**
   * Passes the event the endpoint is stuck on: its position moves just past it (and past the events
   * before it that its filter leaves out), the event counts as sent, as one the filter leaves out
   * does, and the next one is tried at once, on a clean retry slate. Refused unless the endpoint is
   * failing on an event. Like a resend, it ends the lease of the instance delivering, whose writes
   * then no longer apply: an attempt in flight cannot write over the skip. Audited.
   */
  async skip(
    endpointId: string,
    actor: Actor,
    accountId?: string,
  ): Promise<{ skipped: StuckEvent; endpoint: WebhookEndpointView & { attempts: WebhookAttemptView[] } }> {
    const row = await requireEndpoint(this.db, endpointId, accountId);
    const stuck = row.failing_since === null ? null : await this.stuckOn(row);
    if (stuck === null)
      throw new InputError(
        `the webhook endpoint "${endpointId}" is not stuck on an event: ${
          row.failing_since === null ? 'its deliveries are not failing' : 'no event waits after its position'
        }`,
      );
    const progress = newProgress(row.position);
    for (const [change, known] of [...stuck.before, [stuck.change, stuck.known] as const])
      passed(progress, known, change);
    const skipped = stuckEventOf(row.id, stuck);
    const stamp = new Date().toISOString();
    await this.db.transaction().execute(async (trx) => {
      const applied = await webhookRepository.updateIfAt(trx, row.id, row, {
        position: progress.position,
        ...NOT_FAILING,
        lease_owner: null,
        lease_expires_at: null,
        updated_at: stamp,
      });
      if (!applied)
        throw new InputError(
          `the webhook endpoint "${endpointId}" moved on while the skip was being made: nothing was changed`,
        );
      await webhookRepository.forgetAcknowledged(trx, row.id, [...progress.forgotten.values()]);
      await webhookRepository.acknowledge(trx, row.id, [...progress.acknowledged.values()]);
      await auditRepository.insert(trx, {
        account_id: row.account_id,
        subject_type: 'webhook_endpoint',
        subject_id: row.id,
        actor,
        action: 'skipped',
        detail: `${skipped.webhook_id} (${skipped.type} ${skipped.record_id}, seq ${skipped.seq}); failing since ${row.failing_since}`,
        created_at: stamp,
      });
      await notifyWebhooks(trx, '*');
    });
    return { skipped, endpoint: await this.show(row.id) };
  }

  /**
   * The event the endpoint's next attempt sends, as its worker would find it: the first change after
   * its position whose event its filter lets through, with what the receiver knows of it, and the
   * changes before it that the filter leaves out; null when none waits.
   */
  private async stuckOn(row: WebhookEndpointRow): Promise<Stuck | null> {
    const filter = JSON.parse(row.events) as string[];
    const before: [EventChange, Known][] = [];
    let position = row.position;
    for (;;) {
      const batch = await fetchBatch(this.db, this.changeFeed, { ...row, position }, STUCK_READ, 'unknown');
      for (const change of batch.changes) {
        const type = eventType(change, knows(batch.known, change));
        if (matchesFilter(filter, type)) return { change, type, known: batch.known, before };
        before.push([change, batch.known]);
      }
      const last = batch.changes.at(-1);
      if (!batch.more || last === undefined) return null;
      position = last.seq;
    }
  }

  /**
   * The secrets that sign the endpoint's messages now: the current one, then every previous one still
   * in its overlap, newest first.
   */
  async signingSecrets(row: SecretsOfRow, now: Date): Promise<string[]> {
    const box = await this.secrets();
    const secrets = [box.open(row.id, row.secret)];
    for (const previous of livePrevious(row, now).reverse()) {
      const secret = box.open(row.id, previous.secret);
      if (!secrets.includes(secret)) secrets.push(secret);
    }
    return secrets;
  }
}

/** Changes read at a time when looking for the event an endpoint is stuck on. */
const STUCK_READ = 200;

/** The event an endpoint is stuck on, with what `skip` needs to pass it as the worker would. */
interface Stuck {
  change: EventChange;
  type: string;
  known: Known;
  /** The changes before it that the filter leaves out, each with what was known in its read. */
  before: [EventChange, Known][];
}

function stuckEventOf(endpointId: string, stuck: Stuck): StuckEvent {
  return {
    webhook_id: changeWebhookId(endpointId, stuck.change.seq),
    type: stuck.type,
    seq: stuck.change.seq,
    record_id: stuck.change.id,
  };
}

/** How a test event's attempt is logged: `not_sent` (it never left) as the network error it is to the asker. */
function loggedOutcome(outcome: AttemptOutcome): LoggedOutcome {
  return outcome === 'not_sent' ? 'network_error' : outcome;
}

/** What of an endpoint's row says which secrets sign. */
type SecretsOfRow = Pick<
  WebhookEndpointRow,
  'id' | 'secret' | 'previous_secret' | 'previous_secret_expires_at' | 'previous_secrets'
>;

/** A previous secret (sealed) and when it stops signing. */
interface PreviousSecret {
  secret: string;
  expires_at: string;
}

function isPreviousSecret(value: unknown): value is PreviousSecret {
  return (
    typeof value === 'object' &&
    value !== null &&
    'secret' in value &&
    typeof value.secret === 'string' &&
    'expires_at' in value &&
    typeof value.expires_at === 'string' &&
    !Number.isNaN(Date.parse(value.expires_at))
  );
}

/**
 * The endpoint's previous secrets (sealed) that still sign at `now`, oldest rotation first.
 *
 * `previous_secrets` holds them all, each with its own expiry (migration 0011), as long as its newest
 * entry is `previous_secret` as written with it. The release before kept `previous_secret` alone: a
 * rotation it made during a rolling upgrade leaves the list behind, and its own rule applies (its one
 * previous secret, or none after an overlap of 0) until the next rotation by this release.
 */
function livePrevious(row: SecretsOfRow, now: Date): PreviousSecret[] {
  const legacy =
    row.previous_secret === null || row.previous_secret_expires_at === null
      ? null
      : { secret: row.previous_secret, expires_at: row.previous_secret_expires_at };
  let list: PreviousSecret[] = [];
  try {
    const parsed: unknown = JSON.parse(row.previous_secrets ?? '[]');
    if (Array.isArray(parsed) && parsed.every(isPreviousSecret)) list = parsed;
  } catch {
    // Unreadable: the column the previous release writes decides.
  }
  const holds = legacy !== null && list.at(-1)?.secret === legacy.secret;
  const previous = holds ? list : legacy === null ? [] : [legacy];
  return previous.filter((entry) => Date.parse(entry.expires_at) > now.getTime());
}
