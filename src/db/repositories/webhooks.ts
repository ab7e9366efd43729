import type { Insertable, Kysely, Selectable } from 'kysely';
import type {
  Database,
  WebhookAcknowledgedTable,
  WebhookAttemptsTable,
  WebhookEndpointsTable,
} from '../schema.ts';
import { databaseTime } from '../database-time.ts';
import { storeFor } from '../store.ts';
import { repository } from '../store-context.ts';

export type WebhookEndpointRow = Selectable<WebhookEndpointsTable>;
export type WebhookAttemptRow = Omit<Selectable<WebhookAttemptsTable>, 'endpoint_id' | 'size'>;

const ATTEMPT_COLUMNS = [
  'id',
  'webhook_id',
  'type',
  'seq',
  'at',
  'status',
  'duration_ms',
  'error',
  'request_headers',
  'request_body',
  'response_headers',
  'response_body',
  'outcome',
] as const;
/** A record an endpoint acknowledged since it entered the view (`WebhookAcknowledgedTable`). */
export type AcknowledgedRecord = Omit<Selectable<WebhookAcknowledgedTable>, 'endpoint_id'>;

/** An endpoint with what its account's feed and plan say: where the feed stands and whether it may deliver. */
export type LeasedEndpointRow = WebhookEndpointRow & {
  head: number;
  purged_seq: number;
  api_access: number;
};

/** The fields that change over an endpoint's life (state, secrets, position, retries, lease). */
export type EndpointPatch = Partial<
  Omit<WebhookEndpointRow, 'id' | 'account_id' | 'created_by' | 'created_at'>
> & {
  updated_at: string;
};

/** How many attempts the delivery log keeps per endpoint, at most. */
export const ATTEMPTS_KEPT = 1000;
/** The bytes (`size`) of an endpoint's log, at most: past them its oldest attempts go, the newest stays. */
export const ATTEMPT_LOG_BYTES = 4 * 1024 * 1024;
/** How long the delivery log keeps an attempt. */
export const ATTEMPT_LOG_DAYS = 30;

/** The moment before which the delivery log keeps nothing, seen at `now`. */
export const attemptLogCutoff = (now: Date): string =>
  new Date(now.getTime() - ATTEMPT_LOG_DAYS * 86_400_000).toISOString();

/**
 * Which attempts of the log to read: by outcome (`success`, `failure`, or one outcome of a failure),
 * by event type (exact types and `kind.*` wildcards; `*` or none for all), and not before `since`.
 */
export interface AttemptFilter {
  outcome?: string;
  types?: readonly string[];
  since?: string;
}

/** An endpoint's lease as it stands, read on the database's clock (`leaseStanding`). */
type LeaseStanding = Pick<WebhookEndpointRow, 'state' | 'position' | 'lease_owner' | 'lease_expires_at'> & {
  database_now: string;
};

export const webhookRepository = repository('webhookRepository', {
  async insert(db: Kysely<Database>, row: Insertable<WebhookEndpointsTable>): Promise<void> {
    await db.insertInto('webhook_endpoints').values(row).execute();
  },

  async findById(db: Kysely<Database>, id: string): Promise<WebhookEndpointRow | undefined> {
    return db.selectFrom('webhook_endpoints').selectAll().where('id', '=', id).executeTakeFirst();
  },

  /** The account's endpoints, oldest first, each with its account's feed head (for the lag). */
  async listByAccount(
    db: Kysely<Database>,
    accountId: string,
  ): Promise<(WebhookEndpointRow & { head: number })[]> {
    return db
      .selectFrom('webhook_endpoints as w')
      .innerJoin('accounts as a', 'a.id', 'w.account_id')
      .selectAll('w')
      .select('a.data_version as head')
      .where('w.account_id', '=', accountId)
      .orderBy('w.created_at')
      .orderBy('w.id')
      .execute();
  },

  /** Whether any account has an endpoint: with no SMTP_URL, the start warns that failures go untold. */
  async anyEndpoint(db: Kysely<Database>): Promise<boolean> {
    return (await db.selectFrom('webhook_endpoints').select('id').limit(1).executeTakeFirst()) !== undefined;
  },

  /** The account's endpoints that are disabled, or failing since `failingBefore` or earlier: the panel's banner. */
  async troubledByAccount(
    db: Kysely<Database>,
    accountId: string,
    failingBefore: string,
  ): Promise<Pick<WebhookEndpointRow, 'id' | 'url' | 'state' | 'disabled_reason' | 'failing_since'>[]> {
    return db
      .selectFrom('webhook_endpoints')
      .select(['id', 'url', 'state', 'disabled_reason', 'failing_since'])
      .where('account_id', '=', accountId)
      .where((eb) => eb.or([eb('state', '=', 'disabled'), eb('failing_since', '<=', failingBefore)]))
      .orderBy('created_at')
      .orderBy('id')
      .execute();
  },

  /**
   * Holds the account's endpoints still until the transaction ends, so that counting them and
   * adding one (or checking an edit against them) is one step: two creations at once cannot both
   * pass the cap. PostgreSQL: a transaction-level advisory lock of its own per account, which
   * writers of the account's data do not wait for; SQLite: the transaction's BEGIN IMMEDIATE
   * already holds the one write lock.
   */
  async lockAccountEndpoints(db: Kysely<Database>, accountId: string): Promise<void> {
    await storeFor(db).lockName(db, `webhook_endpoints:${accountId}`);
  },

  async countByAccount(db: Kysely<Database>, accountId: string): Promise<number> {
    const row = await db
      .selectFrom('webhook_endpoints')
      .select((eb) => eb.fn.countAll<number | string>().as('count'))
      .where('account_id', '=', accountId)
      .executeTakeFirstOrThrow();
    return Number(row.count);
  },

  /** The account's endpoint with this URL and (canonical) event filter, other than `exceptId`. */
  async findByTarget(
    db: Kysely<Database>,
    target: { accountId: string; url: string; events: string },
    exceptId?: string,
  ): Promise<WebhookEndpointRow | undefined> {
    let query = db
      .selectFrom('webhook_endpoints')
      .selectAll()
      .where('account_id', '=', target.accountId)
      .where('url', '=', target.url)
      .where('events', '=', target.events);
    if (exceptId !== undefined) query = query.where('id', '!=', exceptId);
    return query.orderBy('created_at').limit(1).executeTakeFirst();
  },

  async update(db: Kysely<Database>, id: string, patch: EndpointPatch): Promise<boolean> {
    const result = await db
      .updateTable('webhook_endpoints')
      .set(patch)
      .where('id', '=', id)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  },

  /**
   * `patch`, only while the endpoint's position and failure are still those given (read before the
   * change was decided): false when its deliveries moved it meanwhile.
   */
  async updateIfAt(
    db: Kysely<Database>,
    id: string,
    at: Pick<WebhookEndpointRow, 'position' | 'failing_since'>,
    patch: EndpointPatch,
  ): Promise<boolean> {
    const result = await db
      .updateTable('webhook_endpoints')
      .set(patch)
      .where('id', '=', id)
      .where('position', '=', at.position)
      .where((eb) =>
        at.failing_since === null
          ? eb('failing_since', 'is', null)
          : eb('failing_since', '=', at.failing_since),
      )
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  },

  async delete(db: Kysely<Database>, id: string): Promise<boolean> {
    const result = await db.deleteFrom('webhook_endpoints').where('id', '=', id).executeTakeFirst();
    return Number(result.numDeletedRows) === 1;
  },

  /**
   * Extends the leases of `leases` (the endpoints an instance runs a worker for, each with the
   * claim token it holds it under) to `leaseMs` from now on the database's clock, and returns the
   * ids still held so: an endpoint disabled, deleted or released meanwhile, or taken over after a
   * lease that ran out, is not among them. A lease whose worker ended is not renewed: it runs out,
   * and the endpoint is claimed again. One that ran out and was taken by nobody is still its
   * holder's (nobody else can have delivered meanwhile: a claim changes the owner) and is renewed.
   */
  async renewLeases(
    db: Kysely<Database>,
    leases: { id: string; owner: string }[],
    leaseMs: number,
  ): Promise<string[]> {
    if (leases.length === 0) return [];
    const rows = await db
      .updateTable('webhook_endpoints')
      .set({ lease_expires_at: databaseTime(db, leaseMs) })
      .where(
        'id',
        'in',
        leases.map((lease) => lease.id),
      )
      .where('lease_owner', 'in', [...new Set(leases.map((lease) => lease.owner))])
      .where('state', '=', 'active')
      .returning(['id', 'lease_owner'])
      .execute();
    // Each endpoint's own token: a row held under another token of the same instance is not its.
    const owners = new Map(leases.map((lease) => [lease.id, lease.owner]));
    return rows.filter((row) => owners.get(row.id) === row.lease_owner).map((row) => row.id);
  },

  /**
   * Takes up to `limit` active endpoints that no instance holds (never leased, released, or whose
   * holder's lease ran out on the database's clock) for `owner`, for `leaseMs` on that clock. On
   * PostgreSQL rows another instance is claiming at the same moment are skipped (`FOR UPDATE SKIP
   * LOCKED`), so two instances never take the same endpoint; SQLite has one writer at a time.
   */
  async claim(db: Kysely<Database>, owner: string, leaseMs: number, limit: number): Promise<string[]> {
    let free = db
      .selectFrom('webhook_endpoints')
      .select('id')
      .where('state', '=', 'active')
      .where((eb) => eb.or([eb('lease_owner', 'is', null), eb('lease_expires_at', '<', databaseTime(db))]))
      .limit(limit);
    free = storeFor(db).lockRows(free, 'update skip locked');
    const rows = await db
      .updateTable('webhook_endpoints')
      .set({ lease_owner: owner, lease_expires_at: databaseTime(db, leaseMs) })
      .where('id', 'in', free)
      .returning('id')
      .execute();
    return rows.map((row) => row.id);
  },

  /**
   * Whether any active endpoint is free to claim (on the database's clock): a read, so that an idle
   * look costs no write.
   */
  async anyClaimable(db: Kysely<Database>): Promise<boolean> {
    const row = await db
      .selectFrom('webhook_endpoints')
      .select('id')
      .where('state', '=', 'active')
      .where((eb) => eb.or([eb('lease_owner', 'is', null), eb('lease_expires_at', '<', databaseTime(db))]))
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  },

  /**
   * Gives up every lease an instance holds, whatever claim it came with (tokens `INSTANCE/N`):
   * another instance may take them at once.
   */
  async release(db: Kysely<Database>, instance: string): Promise<void> {
    await db
      .updateTable('webhook_endpoints')
      .set({ lease_owner: null, lease_expires_at: null })
      .where('lease_owner', 'like', `${instance}/%`)
      .execute();
  },

  /** The endpoint if `owner` holds its lease, with its account's feed head, purge mark and plan. */
  async findLeased(db: Kysely<Database>, id: string, owner: string): Promise<LeasedEndpointRow | undefined> {
    return db
      .selectFrom('webhook_endpoints as w')
      .innerJoin('accounts as a', 'a.id', 'w.account_id')
      .selectAll('w')
      .select(['a.data_version as head', 'a.changes_purged_seq as purged_seq', 'a.api_access'])
      .where('w.id', '=', id)
      .where('w.lease_owner', '=', owner)
      .executeTakeFirst();
  },

  /**
   * What a worker reads before each POST, by the endpoint's key alone: who holds it, in which state,
   * at which position, until when, and the database's time now (the lease's time left is told on
   * the database's clock, not the instance's). Undefined when the endpoint was deleted.
   */
  async leaseStanding(db: Kysely<Database>, id: string): Promise<LeaseStanding | undefined> {
    // Before every POST: built and compiled once per store, prepared once per PostgreSQL
    // connection; only the endpoint's id, the last parameter, changes.
    const store = storeFor(db);
    const compiled = store.compiledOnce('webhookRepository.leaseStanding', () =>
      store.prepared(
        db
          .selectFrom('webhook_endpoints')
          .select([
            'state',
            'position',
            'lease_owner',
            'lease_expires_at',
            databaseTime(db).as('database_now'),
          ])
          .where('id', '=', id)
          .compile(),
      ),
    );
    const { rows } = await db.executeQuery<LeaseStanding>({
      ...compiled,
      parameters: [...compiled.parameters.slice(0, -1), id],
    });
    return rows[0];
  },

  /**
   * The delivery loop's write: `patch` applies only while `owner` still holds the lease (false
   * otherwise: another instance delivers now, and this one must stop).
   */
  async updateLeased(
    db: Kysely<Database>,
    id: string,
    owner: string,
    patch: EndpointPatch,
  ): Promise<boolean> {
    const result = await db
      .updateTable('webhook_endpoints')
      .set(patch)
      .where('id', '=', id)
      .where('lease_owner', '=', owner)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  },

  /**
   * Adds the attempts of one endpoint to its delivery log, then trims the log: it keeps the newest
   * ATTEMPTS_KEPT attempts that fit in ATTEMPT_LOG_BYTES together (the newest always), none older
   * than ATTEMPT_LOG_DAYS at `now`. The trim reads the endpoint's entries on the index of
   * (endpoint_id, id, at, size), never their bodies: one count and sum of them, then only the
   * oldest, as many as go. (Ranking the whole log with a window at each write cost SQLite about
   * 20 µs of CPU per attempt logged, a fifth of a delivery's; this, about 7.)
   */
  async recordAttempts(
    db: Kysely<Database>,
    attempts: Insertable<WebhookAttemptsTable>[],
    now = new Date(),
  ): Promise<void> {
    // Those the trim would drop at once are not written.
    const kept: Insertable<WebhookAttemptsTable>[] = [];
    let bytes = 0;
    for (let i = attempts.length - 1; i >= 0 && kept.length < ATTEMPTS_KEPT; i -= 1) {
      const attempt = attempts[i] as Insertable<WebhookAttemptsTable>;
      bytes += attempt.size ?? 0;
      if (kept.length > 0 && bytes > ATTEMPT_LOG_BYTES) break;
      kept.unshift(attempt);
    }
    if (kept.length === 0) return;
    await db.insertInto('webhook_attempts').values(kept).execute();
    const endpointId = kept[0]?.endpoint_id as string;
    const log = () => db.selectFrom('webhook_attempts').where('endpoint_id', '=', endpointId);
    const whole = await log()
      .select((eb) => [
        eb.fn.countAll().as('count'),
        eb.fn.sum('size').as('bytes'),
        eb.fn.min('at').as('oldest'),
      ])
      .executeTakeFirstOrThrow();
    let left = Number(whole.count);
    let overCount = left - ATTEMPTS_KEPT;
    let overBytes = Number(whole.bytes) - ATTEMPT_LOG_BYTES;
    const cutoff = attemptLogCutoff(now);
    if (overCount <= 0 && overBytes <= 0 && (whole.oldest === null || whole.oldest >= cutoff)) return;
    // Oldest first, each entry goes while the log is past a bound or the entry past its age; the
    // newest stays. Read in pages: as many as the count bound sends away, and a few more.
    let last: number | null = null;
    let after = 0;
    walk: while (left > 1) {
      const page = await log()
        .select(['id', 'at', 'size'])
        .where('id', '>', after)
        .orderBy('id')
        .limit(Math.max(overCount, 0) + 20)
        .execute();
      for (const entry of page) {
        if (left === 1 || !(overCount > 0 || overBytes > 0 || entry.at < cutoff)) break walk;
        last = entry.id;
        after = entry.id;
        left -= 1;
        overCount -= 1;
        overBytes -= entry.size;
      }
      if (page.length === 0) break;
    }
    if (last !== null)
      await db
        .deleteFrom('webhook_attempts')
        .where('endpoint_id', '=', endpointId)
        .where('id', '<=', last)
        .execute();
  },

  /**
   * Deletes the attempts older than ATTEMPT_LOG_DAYS at `now` from every endpoint's log, also of
   * endpoints no attempt was written for since (a write trims its own log): one index read per
   * endpoint finds the logs that hold any.
   */
  async purgeOldAttempts(db: Kysely<Database>, now = new Date()): Promise<number> {
    const cutoff = attemptLogCutoff(now);
    const stale = await db
      .selectFrom('webhook_endpoints as e')
      .select('e.id')
      .where(
        (eb) =>
          eb
            .selectFrom('webhook_attempts as a')
            .select('a.at')
            .whereRef('a.endpoint_id', '=', 'e.id')
            .orderBy('a.id')
            .limit(1),
        '<',
        cutoff,
      )
      .execute();
    let deleted = 0;
    for (const { id } of stale) {
      const result = await db
        .deleteFrom('webhook_attempts')
        .where('endpoint_id', '=', id)
        .where('at', '<', cutoff)
        .executeTakeFirst();
      deleted += Number(result.numDeletedRows);
    }
    return deleted;
  },

  /** Those of `ids` the endpoint acknowledged since they last entered the view, with that entry's seq. */
  async acknowledged(db: Kysely<Database>, endpointId: string, ids: string[]): Promise<AcknowledgedRecord[]> {
    if (ids.length === 0) return [];
    return db
      .selectFrom('webhook_acknowledged')
      .select(['record_type', 'record_id', 'created_seq'])
      .where('endpoint_id', '=', endpointId)
      .where('record_id', 'in', ids)
      .execute();
  },

  /** Remembers `records` as acknowledged by the endpoint, in place of what it held of their earlier lives. */
  async acknowledge(db: Kysely<Database>, endpointId: string, records: AcknowledgedRecord[]): Promise<void> {
    if (records.length === 0) return;
    await db
      .insertInto('webhook_acknowledged')
      .values(records.map((record) => ({ endpoint_id: endpointId, ...record })))
      .onConflict((oc) =>
        oc
          .columns(['endpoint_id', 'record_id', 'record_type'])
          .doUpdateSet({ created_seq: (eb) => eb.ref('excluded.created_seq') }),
      )
      .execute();
  },

  /**
   * Forgets what the endpoint acknowledged: of `records` (records that left the view), or, without
   * them, everything (its `known_through` moved past all of it, or its position was set by hand).
   */
  async forgetAcknowledged(
    db: Kysely<Database>,
    endpointId: string,
    records?: Pick<AcknowledgedRecord, 'record_type' | 'record_id'>[],
  ): Promise<void> {
    if (records?.length === 0) return;
    let query = db.deleteFrom('webhook_acknowledged').where('endpoint_id', '=', endpointId);
    if (records !== undefined) {
      // One IN list per record type (four at most), rather than one condition per record.
      const byType = Map.groupBy(records, (record) => record.record_type);
      query = query.where((eb) =>
        eb.or(
          [...byType].map(([type, ofType]) =>
            eb.and([
              eb('record_type', '=', type),
              eb(
                'record_id',
                'in',
                ofType.map((record) => record.record_id),
              ),
            ]),
          ),
        ),
      );
    }
    await query.execute();
  },

  /** The endpoint's latest `limit` attempts that pass `filter`, newest first. */
  async listAttempts(
    db: Kysely<Database>,
    endpointId: string,
    limit: number,
    filter: AttemptFilter = {},
  ): Promise<WebhookAttemptRow[]> {
    let query = db
      .selectFrom('webhook_attempts')
      .select(ATTEMPT_COLUMNS)
      .where('endpoint_id', '=', endpointId);
    if (filter.since !== undefined) query = query.where('at', '>=', filter.since);
    const { outcome, types } = filter;
    if (outcome === 'success') {
      query = query.where('status', '>=', 200).where('status', '<', 300);
    } else if (outcome === 'failure') {
      query = query.where((eb) =>
        eb.or([eb('status', 'is', null), eb('status', '<', 200), eb('status', '>=', 300)]),
      );
    } else if (outcome !== undefined) {
      query = query.where('outcome', '=', outcome);
    }
    if (types !== undefined && !types.includes('*') && types.length > 0) {
      query = query.where((eb) =>
        eb.or(
          types.map((type) =>
            type.endsWith('.*') ? eb('type', 'like', `${type.slice(0, -1)}%`) : eb('type', '=', type),
          ),
        ),
      );
    }
    return query.orderBy('id', 'desc').limit(limit).execute();
  },

  /** One attempt of the endpoint's log, unless older than `since`. */
  async findAttempt(
    db: Kysely<Database>,
    endpointId: string,
    attemptId: number,
    since: string,
  ): Promise<WebhookAttemptRow | undefined> {
    return db
      .selectFrom('webhook_attempts')
      .select(ATTEMPT_COLUMNS)
      .where('endpoint_id', '=', endpointId)
      .where('id', '=', attemptId)
      .where('at', '>=', since)
      .executeTakeFirst();
  },

  /** The latest attempt of the event `webhookId` in the endpoint's log whose request was kept, not older than `since`. */
  async latestAttemptOf(
    db: Kysely<Database>,
    endpointId: string,
    webhookId: string,
    since: string,
  ): Promise<WebhookAttemptRow | undefined> {
    return db
      .selectFrom('webhook_attempts')
      .select(ATTEMPT_COLUMNS)
      .where('endpoint_id', '=', endpointId)
      .where('webhook_id', '=', webhookId)
      .where('at', '>=', since)
      .where('request_body', 'is not', null)
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst();
  },
});
