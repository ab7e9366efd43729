import { type Insertable, type Kysely, type Selectable, sql } from 'kysely';
import type { AccountsTable, ApiKeysTable, Database } from '../schema.ts';
import { storeFor } from '../store.ts';
import { repository } from '../store-context.ts';

/** A key as its owners see it: everything but the hash, which never leaves the store. */
export type ApiKeyRow = Omit<Selectable<ApiKeysTable>, 'key_hash'>;

/**
 * What a request needs to know about its key and account, read in one indexed lookup. The
 * account's `created_at` (`account_created_at`) tells its incarnations apart: an account id erased
 * and imported again starts its feed, `data_version`, from 0 again, under a new `created_at`.
 */
export type KeyForAuth = Pick<
  Selectable<ApiKeysTable>,
  'id' | 'account_id' | 'scope' | 'state' | 'expires_at'
> &
  Pick<
    Selectable<AccountsTable>,
    'api_access' | 'rate_limit_per_hour' | 'incident_count' | 'data_version'
  > & {
    account_created_at: Selectable<AccountsTable>['created_at'];
  };

/** What a key's row shows (never its hash). */
export const API_KEY_COLUMNS = [
  'id',
  'account_id',
  'name',
  'prefix',
  'scope',
  'state',
  'expires_at',
  'last_used_at',
  'created_by',
  'created_at',
  'updated_at',
  'rolled_from',
  'rolled_to',
] as const;

/** The states the panel's list filters by; `expiring` is an active key that expires within a week. */
export type KeyListState = 'active' | 'disabled' | 'expiring' | 'expired' | 'revoked';

export interface KeyListQuery {
  /** Part of the name (any case), or the start of the prefix (with or without `svc_`). */
  search: string;
  state: KeyListState | null;
  /** `created`: newest first (the default); `last_used`: most recently used first, never used last. */
  sort: 'created' | 'last_used';
  offset: number;
  limit: number;
  /** The instant the states are judged at, and the end of the "expiring" week. */
  now: string;
  weekFromNow: string;
}

/** `value` matched literally inside a LIKE pattern (escape character `\`). */
function likeLiteral(value: string): string {
  return value.replace(/[\\%_]/g, (c) => `\\${c}`);
}

function authLookup(db: Kysely<Database>, keyHash: string) {
  return db
    .selectFrom('api_keys as k')
    .innerJoin('accounts as a', 'a.id', 'k.account_id')
    .select([
      'k.id',
      'k.account_id',
      'k.scope',
      'k.state',
      'k.expires_at',
      'a.api_access',
      'a.rate_limit_per_hour',
      'a.incident_count',
      'a.data_version',
      'a.created_at as account_created_at',
    ])
    .where('k.key_hash', '=', keyHash);
}

export const apiKeyRepository = repository('apiKeyRepository', {
  /**
   * Runs on every public request that `KeyLookup` cannot answer from a row it knows to be current,
   * so the query is built and compiled once per store (its only parameter is the key hash, the
   * `where` above) and only that parameter changes; PostgreSQL prepares it once per connection.
   */
  async findForAuthByHash(db: Kysely<Database>, keyHash: string): Promise<KeyForAuth | undefined> {
    const store = storeFor(db);
    const compiled = store.compiledOnce('apiKeyRepository.findForAuthByHash', () =>
      store.prepared(authLookup(db, keyHash).compile()),
    );
    const { rows } = await db.executeQuery<KeyForAuth>({ ...compiled, parameters: [keyHash] });
    return rows[0];
  },

  async findById(db: Kysely<Database>, id: string): Promise<ApiKeyRow | undefined> {
    return db.selectFrom('api_keys').select(API_KEY_COLUMNS).where('id', '=', id).executeTakeFirst();
  },

  async listByAccount(db: Kysely<Database>, accountId: string): Promise<ApiKeyRow[]> {
    return db
      .selectFrom('api_keys')
      .select(API_KEY_COLUMNS)
      .where('account_id', '=', accountId)
      .orderBy('created_at', 'desc')
      .orderBy('id')
      .execute();
  },

  /** One page of the account's keys that match `query`, and how many match in all. */
  async findPage(
    db: Kysely<Database>,
    accountId: string,
    query: KeyListQuery,
  ): Promise<{ rows: ApiKeyRow[]; total: number }> {
    let filtered = db.selectFrom('api_keys').where('account_id', '=', accountId);
    const term = query.search.trim().toLowerCase();
    if (term !== '') {
      const inName = `%${likeLiteral(term)}%`;
      const atPrefixStart = `${likeLiteral(term)}%`;
      const afterSvc = `${likeLiteral(`svc_${term}`)}%`;
      filtered = filtered.where(
        (eb) =>
          sql<boolean>`(lower(${eb.ref('name')}) like ${inName} escape '\\' or ${eb.ref('prefix')} like ${atPrefixStart} escape '\\' or ${eb.ref('prefix')} like ${afterSvc} escape '\\')`,
      );
    }
    const { now, weekFromNow } = query;
    switch (query.state) {
      case null:
        break;
      case 'disabled':
      case 'revoked':
        filtered = filtered.where('state', '=', query.state);
        break;
      case 'active':
        filtered = filtered
          .where('state', '=', 'active')
          .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]));
        break;
      case 'expiring':
        filtered = filtered
          .where('state', '=', 'active')
          .where('expires_at', '>', now)
          .where('expires_at', '<=', weekFromNow);
        break;
      case 'expired':
        filtered = filtered.where('state', '=', 'active').where('expires_at', '<=', now);
        break;
    }
    const counted = await filtered
      .select((eb) => eb.fn.countAll<number | string>().as('total'))
      .executeTakeFirst();
    let ordered = filtered.select(API_KEY_COLUMNS);
    ordered =
      query.sort === 'last_used'
        ? ordered
            .orderBy(sql`last_used_at is null`)
            .orderBy('last_used_at', 'desc')
            .orderBy('id')
        : ordered.orderBy('created_at', 'desc').orderBy('id');
    const rows = await ordered.limit(query.limit).offset(query.offset).execute();
    return { rows, total: Number(counted?.total ?? 0) };
  },

  /** The names of those of `ids` that are keys of the account. */
  async namesByIds(db: Kysely<Database>, accountId: string, ids: string[]): Promise<Map<string, string>> {
    if (ids.length === 0) return new Map();
    const rows = await db
      .selectFrom('api_keys')
      .select(['id', 'name'])
      .where('account_id', '=', accountId)
      .where('id', 'in', ids)
      .execute();
    return new Map(rows.map((row) => [row.id, row.name]));
  },

  async insert(db: Kysely<Database>, row: Insertable<ApiKeysTable>): Promise<void> {
    await db.insertInto('api_keys').values(row).execute();
  },

  /**
   * Compare-and-set: writes `patch` only while the key's name, scope and state are still `seen`
   * (what the caller decided on); returns whether it wrote. On PostgreSQL a concurrent writer's row
   * lock makes this wait and then re-check against the committed row, so two writers that read the
   * same state can never both win.
   */
  async updateIfUnchanged(
    db: Kysely<Database>,
    seen: Pick<ApiKeyRow, 'id' | 'name' | 'scope' | 'state'>,
    patch: Partial<Pick<ApiKeyRow, 'name' | 'scope' | 'state'>> & { updated_at: string },
  ): Promise<boolean> {
    const result = await db
      .updateTable('api_keys')
      .set(patch)
      .where('id', '=', seen.id)
      .where('name', '=', seen.name)
      .where('scope', '=', seen.scope)
      .where('state', '=', seen.state)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  },

  /**
   * The old half of a roll, compare-and-set like `updateIfUnchanged`: sets the key's expiry and its
   * successor only while it is still active, unrolled and with the expiry the caller decided on.
   */
  async markRolled(
    db: Kysely<Database>,
    seen: Pick<ApiKeyRow, 'id' | 'expires_at'>,
    patch: { expires_at: string; rolled_to: string; updated_at: string },
  ): Promise<boolean> {
    const result = await db
      .updateTable('api_keys')
      .set(patch)
      .where('id', '=', seen.id)
      .where('state', '=', 'active')
      .where('rolled_to', 'is', null)
      .where((eb) =>
        seen.expires_at === null ? eb('expires_at', 'is', null) : eb('expires_at', '=', seen.expires_at),
      )
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  },

  /** Moves `last_used_at` forward only, so that instances flushing out of order never move it back. */
  async recordLastUse(db: Kysely<Database>, id: string, usedAt: string): Promise<void> {
    await db
      .updateTable('api_keys')
      .set({ last_used_at: usedAt })
      .where('id', '=', id)
      .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', usedAt)]))
      .execute();
  },

  /**
   * Usable keys expiring after `from` and by `to`, of every account: what the expiry mails warn of.
   * A rolled key is left out: its successor carries on.
   */
  async expiringBetween(db: Kysely<Database>, from: string, to: string): Promise<ApiKeyRow[]> {
    return db
      .selectFrom('api_keys')
      .select(API_KEY_COLUMNS)
      .where('state', '=', 'active')
      .where('rolled_to', 'is', null)
      .where('expires_at', '>', from)
      .where('expires_at', '<=', to)
      .orderBy('expires_at')
      .orderBy('id')
      .execute();
  },
});
