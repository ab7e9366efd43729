import type { Kysely, Selectable } from 'kysely';
import type {
  ApiKeysTable,
  AuditEventsTable,
  Database,
  DepartmentsTable,
  IncidentsTable,
  OauthClientsTable,
  UsersTable,
  WebhookEndpointsTable,
} from '../schema.ts';
import { API_KEY_COLUMNS } from './api-keys.ts';
import { notifyWebhooks } from './notifications.ts';
import { storeFor } from '../store.ts';
import { repository } from '../store-context.ts';

/**
 * An account and everything of it, table by table: the reads of `safety-api accounts export` (in
 * keyset chunks, each an index range read, so that memory stays bounded whatever the account
 * holds) and the erasure of `safety-api accounts delete`. What is read here never includes a
 * secret: no key hash, no webhook signing secret, no client secret hash, no password hash, no
 * OAuth token.
 */

/** Where a keyset walk stands: the last row of the previous chunk, or null before the first. */
export type After<Key> = Key | null;

/** A record of the public view's tables, as an import takes it back (no feed columns). */
export type NamedRecordRow = Pick<
  Selectable<DepartmentsTable>,
  'id' | 'account_id' | 'name' | 'active' | 'created_at'
>;
export type UserRecordRow = Omit<
  Selectable<UsersTable>,
  'password_hash' | 'change_seq' | 'changed_at' | 'created_seq'
>;
export type IncidentRecordRow = Omit<Selectable<IncidentsTable>, 'change_seq' | 'changed_at' | 'created_seq'>;

/** Walk key of the tables read in feed order: (change_seq, id), on the (account_id, change_seq) index. */
export interface SeqKey {
  change_seq: number;
  id: string;
}

export type ApiKeyMetadataRow = Omit<Selectable<ApiKeysTable>, 'key_hash'>;
export type WebhookEndpointMetadataRow = Omit<
  Selectable<WebhookEndpointsTable>,
  // `duplicate_of` is the store's bookkeeping of a rule (migration 0012), not the tenant's data.
  'secret' | 'previous_secret' | 'previous_secrets' | 'lease_owner' | 'lease_expires_at' | 'duplicate_of'
>;
export type OauthClientMetadataRow = Omit<
  Selectable<OauthClientsTable>,
  'secret_hash' | 'previous_secret_hash'
>;
export type AuditEventRecordRow = Selectable<AuditEventsTable>;

/** A grant a user of the account gave a client of the account (oidc-provider's Grant model). */
export interface OauthGrantRow {
  id: string;
  client_id: string;
  user_id: string | null;
  /** The stored Grant payload (JSON): scopes and issue time; it holds no token. */
  payload: string;
  expires_at: string | null;
  last_used_at: string | null;
}

/** Rows erased per table by `erase`, for the service log. */
export type ErasedCounts = Record<ErasedTable, number>;

/** The tables `erase` empties of the account's rows by their `account_id` alone, in its order. */
const ERASED_BY_ACCOUNT_ID = [
  'mail_notices',
  'webhook_endpoints',
  'audit_events',
  'incident_blocks',
  'incident_tombstones',
  'incidents',
  'users',
  'departments',
  'locations',
  'oauth_clients',
  'api_keys',
] as const;

/**
 * Every table `erase` deletes from, in the order it does: rows that point at others before those
 * they point at, the account last.
 */
export const ERASED_TABLES = [
  'key_usage',
  'oauth_payloads',
  'admin_sessions',
  'webhook_attempts',
  'webhook_acknowledged',
  ...ERASED_BY_ACCOUNT_ID,
  'accounts',
] as const satisfies readonly (keyof Database)[];

export type ErasedTable = (typeof ERASED_TABLES)[number];

const NAMED_COLUMNS = ['id', 'account_id', 'name', 'active', 'created_at'] as const;
const USER_COLUMNS = [
  'id',
  'account_id',
  'name',
  'email',
  'role',
  'department',
  'job_title',
  'active',
  'vendor_support',
  'created_at',
] as const;
const INCIDENT_COLUMNS = [
  'id',
  'account_id',
  'incident_number',
  'description',
  'status',
  'severity_likelihood',
  'severity_impact',
  'location',
  'incident_date',
  'created_at',
  'updated_at',
  'position',
] as const;
const ENDPOINT_COLUMNS = [
  'id',
  'account_id',
  'url',
  'description',
  'events',
  'state',
  'disabled_reason',
  'previous_secret_expires_at',
  'position',
  'known_through',
  'failing_since',
  'failed_attempts',
  'next_attempt_at',
  'last_attempt_at',
  'last_status',
  'created_by',
  'created_at',
  'updated_at',
] as const;
const CLIENT_COLUMNS = [
  'client_id',
  'account_id',
  'name',
  'redirect_uris',
  'is_public',
  'created_at',
  'previous_secret_expires_at',
] as const;

/** The account's rows of a public-view table after `after`, in (change_seq, id) order. */
function bySeq<T extends 'departments' | 'locations' | 'users'>(
  db: Kysely<Database>,
  table: T,
  accountId: string,
  after: After<SeqKey>,
) {
  let query = db.selectFrom(table as 'users').where('account_id', '=', accountId);
  if (after !== null) {
    query = query.where((eb) =>
      eb.or([
        eb('change_seq', '>', after.change_seq),
        eb.and([eb('change_seq', '=', after.change_seq), eb('id', '>', after.id)]),
      ]),
    );
  }
  return query.orderBy('change_seq').orderBy('id');
}

export const accountDataRepository = repository('accountDataRepository', {
  /** Departments or locations of the account, every one (active or not), a chunk at a time. */
  async namedChunk(
    db: Kysely<Database>,
    table: 'departments' | 'locations',
    accountId: string,
    after: After<SeqKey>,
    limit: number,
  ): Promise<(NamedRecordRow & SeqKey)[]> {
    return bySeq(db, table, accountId, after)
      .select([...NAMED_COLUMNS, 'change_seq'])
      .limit(limit)
      .execute();
  },

  /** Users of the account, every one (inactive and vendor support too), without password hashes. */
  async userChunk(
    db: Kysely<Database>,
    accountId: string,
    after: After<SeqKey>,
    limit: number,
  ): Promise<(UserRecordRow & SeqKey)[]> {
    return bySeq(db, 'users', accountId, after)
      .select([...USER_COLUMNS, 'change_seq'])
      .limit(limit)
      .execute();
  },

  /**
   * Incidents of the account in paging order (created_at, id ascending: `position`), the order an
   * import places without re-ranking; `after` is the last position read.
   */
  async incidentChunk(
    db: Kysely<Database>,
    accountId: string,
    after: number,
    limit: number,
  ): Promise<IncidentRecordRow[]> {
    return db
      .selectFrom('incidents')
      .select(INCIDENT_COLUMNS)
      .where('account_id', '=', accountId)
      .where('position', '>', after)
      .orderBy('position')
      .limit(limit)
      .execute();
  },

  /** The account's API keys, oldest first, without their hashes. */
  async apiKeyChunk(
    db: Kysely<Database>,
    accountId: string,
    after: After<{ created_at: string; id: string }>,
    limit: number,
  ): Promise<ApiKeyMetadataRow[]> {
    let query = db.selectFrom('api_keys').select(API_KEY_COLUMNS).where('account_id', '=', accountId);
    if (after !== null) {
      query = query.where((eb) =>
        eb.or([
          eb('created_at', '>', after.created_at),
          eb.and([eb('created_at', '=', after.created_at), eb('id', '>', after.id)]),
        ]),
      );
    }
    return query.orderBy('created_at').orderBy('id').limit(limit).execute();
  },

  /** The account's webhook endpoints, oldest first, without secrets or leases (at most a few dozen). */
  async webhookEndpoints(db: Kysely<Database>, accountId: string): Promise<WebhookEndpointMetadataRow[]> {
    return db
      .selectFrom('webhook_endpoints')
      .select(ENDPOINT_COLUMNS)
      .where('account_id', '=', accountId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
  },

  /** The account's OAuth clients, oldest first, without secret hashes. */
  async oauthClients(db: Kysely<Database>, accountId: string): Promise<OauthClientMetadataRow[]> {
    return db
      .selectFrom('oauth_clients')
      .select(CLIENT_COLUMNS)
      .where('account_id', '=', accountId)
      .orderBy('created_at')
      .orderBy('client_id')
      .execute();
  },

  /** The grants given to one client, by id; expired ones too (they are the account's history). */
  async oauthGrantChunk(
    db: Kysely<Database>,
    clientId: string,
    after: string | null,
    limit: number,
  ): Promise<OauthGrantRow[]> {
    let query = db
      .selectFrom('oauth_payloads')
      .select(['id', 'client_id', 'user_id', 'payload', 'expires_at', 'last_used_at'])
      .where('client_id', '=', clientId)
      .where('model', '=', 'Grant');
    if (after !== null) query = query.where('id', '>', after);
    const rows = await query.orderBy('id').limit(limit).execute();
    return rows.map((row) => ({ ...row, client_id: clientId }));
  },

  /** The account's audit trail, oldest first. */
  async auditChunk(
    db: Kysely<Database>,
    accountId: string,
    afterId: number,
    limit: number,
  ): Promise<AuditEventRecordRow[]> {
    return db
      .selectFrom('audit_events')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', '>', afterId)
      .orderBy('id')
      .limit(limit)
      .execute();
  },

  /**
   * Deletes the account and every row of it, in every table, and returns how many rows went from
   * each; undefined (and nothing deleted) when there is no such account. Run it in a transaction.
   *
   * PostgreSQL: the account row, then its keys and webhook endpoints, are locked first (FOR
   * UPDATE). Whatever would add a row of the account meanwhile waits for the commit and then finds
   * its parent gone: a row referencing the account (a key, an audit event, a session) by its
   * foreign key, an import by `lockForChanges`, a server's key-usage flush by its lock on the key
   * (`keyUsageRepository.add`), a webhook delivery's progress by its conditional update of the
   * endpoint. SQLite: the transaction holds the one write lock from its start.
   */
  async erase(db: Kysely<Database>, accountId: string): Promise<ErasedCounts | undefined> {
    const store = storeFor(db);
    const account = db.selectFrom('accounts').select('id').where('id', '=', accountId);
    if ((await store.lockRows(account, 'update').executeTakeFirst()) === undefined) return undefined;
    await store
      .lockRows(db.selectFrom('api_keys').select('id').where('account_id', '=', accountId), 'update')
      .execute();
    await store
      .lockRows(db.selectFrom('webhook_endpoints').select('id').where('account_id', '=', accountId), 'update')
      .execute();

    const keyIds = db.selectFrom('api_keys').select('id').where('account_id', '=', accountId);
    const userIds = db.selectFrom('users').select('id').where('account_id', '=', accountId);
    const clientIds = db.selectFrom('oauth_clients').select('client_id').where('account_id', '=', accountId);
    const endpointIds = db.selectFrom('webhook_endpoints').select('id').where('account_id', '=', accountId);
    const clients = (await clientIds.execute()).map((row) => row.client_id);

    const counts = {} as ErasedCounts;
    const count = async (table: ErasedTable, deleted: Promise<{ numDeletedRows: bigint }[]>) => {
      counts[table] =
        (counts[table] ?? 0) + (await deleted).reduce((n, r) => n + Number(r.numDeletedRows), 0);
    };

    await count('key_usage', db.deleteFrom('key_usage').where('key_id', 'in', keyIds).execute());
    // Everything the OAuth provider keeps for the account's clients and users: grants, tokens and
    // codes issued under them (by grant), provider sessions, and interactions under way, which name
    // their client only inside the payload until a user has signed in.
    const grantIds = db
      .selectFrom('oauth_payloads')
      .select('id')
      .where('model', '=', 'Grant')
      .where((eb) => eb.or([eb('client_id', 'in', clientIds), eb('user_id', 'in', userIds)]));
    await count(
      'oauth_payloads',
      db
        .deleteFrom('oauth_payloads')
        .where((eb) =>
          eb.or([
            eb('client_id', 'in', clientIds),
            eb('user_id', 'in', userIds),
            eb('grant_id', 'in', grantIds),
          ]),
        )
        .execute(),
    );
    for (const clientId of clients) {
      await count(
        'oauth_payloads',
        db
          .deleteFrom('oauth_payloads')
          .where('model', '=', 'Interaction')
          .where(store.contains('payload', `"client_id":${JSON.stringify(clientId)}`))
          .execute(),
      );
    }
    await count(
      'admin_sessions',
      db.deleteFrom('admin_sessions').where('account_id', '=', accountId).execute(),
    );
    await count(
      'webhook_attempts',
      db.deleteFrom('webhook_attempts').where('endpoint_id', 'in', endpointIds).execute(),
    );
    await count(
      'webhook_acknowledged',
      db.deleteFrom('webhook_acknowledged').where('endpoint_id', 'in', endpointIds).execute(),
    );
    for (const table of ERASED_BY_ACCOUNT_ID) {
      await count(table, db.deleteFrom(table).where('account_id', '=', accountId).execute());
    }
    await count('accounts', db.deleteFrom('accounts').where('id', '=', accountId).execute());
    // The deliveries of every instance look at their endpoints again, and find them gone.
    await notifyWebhooks(db, '*');
    await notifyWebhooks(db, accountId);
    return counts;
  },
});
