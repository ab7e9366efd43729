import type { Insertable, Kysely, Selectable } from 'kysely';
import type { AccountsTable, Database, OauthClientsTable } from '../schema.ts';
import { repository } from '../store-context.ts';

export type OauthClientRow = Selectable<OauthClientsTable>;

const COLUMNS = [
  'client_id',
  'account_id',
  'name',
  'redirect_uris',
  'is_public',
  'secret_hash',
  'created_at',
  'previous_secret_hash',
  'previous_secret_expires_at',
] as const;

/** A client with its account's plan, read together: every token request and wider-API call needs both. */
export type OauthClientWithPlan = OauthClientRow &
  Pick<Selectable<AccountsTable>, 'api_access' | 'rate_limit_per_hour'>;

export const oauthClientRepository = repository('oauthClientRepository', {
  async findById(db: Kysely<Database>, clientId: string): Promise<OauthClientRow | undefined> {
    return db
      .selectFrom('oauth_clients')
      .select(COLUMNS)
      .where('client_id', '=', clientId)
      .executeTakeFirst();
  },

  async findWithPlanById(db: Kysely<Database>, clientId: string): Promise<OauthClientWithPlan | undefined> {
    return db
      .selectFrom('oauth_clients as c')
      .innerJoin('accounts as a', 'a.id', 'c.account_id')
      .select(COLUMNS.map((column) => `c.${column}` as const))
      .select(['a.api_access', 'a.rate_limit_per_hour'])
      .where('c.client_id', '=', clientId)
      .executeTakeFirst();
  },

  async listByAccount(db: Kysely<Database>, accountId: string): Promise<OauthClientRow[]> {
    return db
      .selectFrom('oauth_clients')
      .select(COLUMNS)
      .where('account_id', '=', accountId)
      .orderBy('created_at', 'desc')
      .orderBy('client_id')
      .execute();
  },

  async insert(db: Kysely<Database>, row: Insertable<OauthClientsTable>): Promise<void> {
    await db.insertInto('oauth_clients').values(row).execute();
  },

  /**
   * Replaces the secret if it is still `previousSecretHash` (a concurrent rotation wins, and this one
   * changes nothing): returns whether it did. The old hash stays valid until `previousExpiresAt`
   * when `keepPrevious`.
   */
  async rotateSecret(
    db: Kysely<Database>,
    clientId: string,
    secrets: {
      secretHash: string;
      previousSecretHash: string;
      keepPrevious: boolean;
      previousExpiresAt: string;
    },
  ): Promise<boolean> {
    const result = await db
      .updateTable('oauth_clients')
      .set({
        secret_hash: secrets.secretHash,
        previous_secret_hash: secrets.keepPrevious ? secrets.previousSecretHash : null,
        previous_secret_expires_at: secrets.keepPrevious ? secrets.previousExpiresAt : null,
      })
      .where('client_id', '=', clientId)
      .where('secret_hash', '=', secrets.previousSecretHash)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  },

  /** Returns whether a client was deleted. */
  async delete(db: Kysely<Database>, clientId: string): Promise<boolean> {
    const result = await db.deleteFrom('oauth_clients').where('client_id', '=', clientId).executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  },
});
