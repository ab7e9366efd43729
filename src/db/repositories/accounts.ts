import { type Kysely, type Selectable, sql } from 'kysely';
import type { AccountsTable, Database } from '../schema.ts';

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

export const accountRepository = {
  async findById(db: Kysely<Database>, id: string): Promise<AccountRow | undefined> {
    return db.selectFrom('accounts').select(COLUMNS).where('id', '=', id).executeTakeFirst();
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
      .values(accounts.map((a) => ({ ...a, created_at: now, updated_at: now })))
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
   * Marks a change to the account's public data (users, departments, locations) that leaves its
   * incidents as they are. Every writer of that data must call this or `recordIncidentChange`.
   */
  async bumpDataVersion(db: Kysely<Database>, accountId: string): Promise<void> {
    await db
      .updateTable('accounts')
      .set((eb) => ({ data_version: eb('data_version', '+', 1) }))
      .where('id', '=', accountId)
      .execute();
  },

  /** Records a new incident count and bumps the data version (cache keys and ETags follow it). */
  async recordIncidentChange(db: Kysely<Database>, accountId: string, incidentCount: number): Promise<void> {
    await db
      .updateTable('accounts')
      .set((eb) => ({ incident_count: incidentCount, data_version: eb('data_version', '+', 1) }))
      .where('id', '=', accountId)
      .execute();
  },
};
