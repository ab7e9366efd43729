import type { CompiledQuery, Insertable, Kysely, Selectable } from 'kysely';
import { preparedOnPostgres } from '../database.ts';
import type { AccountsTable, ApiKeysTable, Database } from '../schema.ts';

/** A key as its owners see it: everything but the hash, which never leaves the store. */
export type ApiKeyRow = Omit<Selectable<ApiKeysTable>, 'key_hash'>;

/** What a request needs to know about its key and account, read in one indexed lookup. */
export type KeyForAuth = Pick<
  Selectable<ApiKeysTable>,
  'id' | 'account_id' | 'scope' | 'state' | 'expires_at'
> &
  Pick<Selectable<AccountsTable>, 'api_access' | 'rate_limit_per_hour' | 'incident_count' | 'data_version'>;

const COLUMNS = [
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
] as const;

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
    ])
    .where('k.key_hash', '=', keyHash);
}

// Its only parameter is the key hash (the `where` above).
const compiledAuthLookups = new WeakMap<Kysely<Database>, CompiledQuery<KeyForAuth>>();

export const apiKeyRepository = {
  /**
   * Runs on every public request that `KeyLookup` cannot answer from a row it knows to be current,
   * so the query is built and compiled once per database and only its one parameter changes.
   */
  async findForAuthByHash(db: Kysely<Database>, keyHash: string): Promise<KeyForAuth | undefined> {
    let compiled = compiledAuthLookups.get(db);
    if (compiled === undefined) {
      compiled = preparedOnPostgres(authLookup(db, keyHash).compile());
      compiledAuthLookups.set(db, compiled);
    }
    const { rows } = await db.executeQuery<KeyForAuth>({ ...compiled, parameters: [keyHash] });
    return rows[0];
  },

  async findById(db: Kysely<Database>, id: string): Promise<ApiKeyRow | undefined> {
    return db.selectFrom('api_keys').select(COLUMNS).where('id', '=', id).executeTakeFirst();
  },

  async listByAccount(db: Kysely<Database>, accountId: string): Promise<ApiKeyRow[]> {
    return db
      .selectFrom('api_keys')
      .select(COLUMNS)
      .where('account_id', '=', accountId)
      .orderBy('created_at', 'desc')
      .orderBy('id')
      .execute();
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

  /** Moves `last_used_at` forward only, so that instances flushing out of order never move it back. */
  async recordLastUse(db: Kysely<Database>, id: string, usedAt: string): Promise<void> {
    await db
      .updateTable('api_keys')
      .set({ last_used_at: usedAt })
      .where('id', '=', id)
      .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', usedAt)]))
      .execute();
  },
};
