import { type Kysely, type Selectable, sql } from 'kysely';
import type { AccountsTable, Database } from '../schema.ts';
import { notifyWebhooks } from './notifications.ts';
import { storeFor } from '../store.ts';
import { repository } from '../store-context.ts';

const COLUMNS = [
  'id',
  'name',
  'api_access',
  'rate_limit_per_hour',
  'incident_count',
  'data_version',
] as const;

export type AccountRow = Pick<Selectable<AccountsTable>, (typeof COLUMNS)[number]>;

export type AccountInput = Omit<AccountRow, 'incident_count' | 'data_version'>;

export const accountRepository = repository('accountRepository', {
  async findById(db: Kysely<Database>, id: string): Promise<AccountRow | undefined> {
    return db.selectFrom('accounts').select(COLUMNS).where('id', '=', id).executeTakeFirst();
  },

  /**
   * What paging the account's incidents needs: its count, its feed position and its `created_at`,
   * which tells an account id's lives apart (erased and imported again, it counts from 0 again).
   */
  async pagingState(
    db: Kysely<Database>,
    id: string,
  ): Promise<Pick<Selectable<AccountsTable>, 'incident_count' | 'data_version' | 'created_at'> | undefined> {
    return db
      .selectFrom('accounts')
      .select(['incident_count', 'data_version', 'created_at'])
      .where('id', '=', id)
      .executeTakeFirst();
  },

  /** Every account, by name case-insensitively, then id. */
  async listAll(db: Kysely<Database>): Promise<AccountRow[]> {
    return db
      .selectFrom('accounts')
      .select(COLUMNS)
      .orderBy(sql`lower(name)`)
      .orderBy('id')
      .execute();
  },

  async upsertMany(db: Kysely<Database>, accounts: AccountInput[], now: string): Promise<void> {
    if (accounts.length === 0) return;
    await db
      .insertInto('accounts')
      .values(
        accounts.map((a) => ({
          id: a.id,
          name: a.name,
          api_access: a.api_access,
          rate_limit_per_hour: a.rate_limit_per_hour,
          created_at: now,
          updated_at: now,
        })),
      )
      .onConflict((oc) =>
        oc.column('id').doUpdateSet((eb) => ({
          name: eb.ref('excluded.name'),
          api_access: eb.ref('excluded.api_access'),
          rate_limit_per_hour: eb.ref('excluded.rate_limit_per_hour'),
          updated_at: eb.ref('excluded.updated_at'),
        })),
      )
      .execute();
  },

  /**
   * The account's feed head (`data_version`), with its row locked until the transaction ends on
   * PostgreSQL, so that two writers of one account number their changes one after the other
   * (SQLite's transactions already take the one write lock at BEGIN). Null: no such account.
   *
   * FOR NO KEY UPDATE, not FOR UPDATE: writers of the feed still wait for each other, but a row
   * that references the account (a key, an audit event, a session, an OAuth grant) can be written
   * meanwhile. Its foreign key check takes FOR KEY SHARE on the account, which FOR UPDATE blocks:
   * for the whole of an import, a key disabled from the CLI waited for its audit event while
   * holding the key's row, and the servers' flush of that key's last use timed out behind it.
   */
  async lockForChanges(db: Kysely<Database>, accountId: string): Promise<number | null> {
    const query = db.selectFrom('accounts').select('data_version').where('id', '=', accountId);
    return (await storeFor(db).lockRows(query, 'no key update').executeTakeFirst())?.data_version ?? null;
  },

  /**
   * Ends a write to the account's public data: `data_version` moves to the last seq the writer
   * gave out (or on by one when it gave none: a change to the account itself), and, when given,
   * the incident count and the last seq of purged tombstones are recorded. The webhook deliveries
   * of every instance hear of it at the commit.
   */
  async recordChanges(
    db: Kysely<Database>,
    accountId: string,
    change: { lastSeq: number | null; incidentCount?: number; purgedSeq: number },
  ): Promise<void> {
    await db
      .updateTable('accounts')
      .set((eb) => ({
        data_version: change.lastSeq ?? eb('data_version', '+', 1),
        ...(change.incidentCount === undefined ? {} : { incident_count: change.incidentCount }),
        ...(change.purgedSeq === 0
          ? {}
          : {
              changes_purged_seq: sql<number>`CASE WHEN changes_purged_seq > ${change.purgedSeq} THEN changes_purged_seq ELSE ${change.purgedSeq} END`,
            }),
      }))
      .where('id', '=', accountId)
      .execute();
    await notifyWebhooks(db, accountId);
  },
});
