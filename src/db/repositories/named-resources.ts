import { type Kysely, type Selectable, sql } from 'kysely';
import type { Database, DepartmentsTable } from '../schema.ts';
import { afterNameKey, type NameKey, nameKey } from './by-name.ts';

/** Departments and locations share one shape (`LocationsTable` is `DepartmentsTable`) and one set of queries. */
export type NamedResourceTable = 'departments' | 'locations';

export type NamedResourceInput = Omit<Selectable<DepartmentsTable>, 'change_seq' | 'changed_at'>;

/** A department or location as the API shows it. */
export type NamedResourceRow = Pick<NamedResourceInput, 'id' | 'name' | 'created_at'>;

/** Active rows of the account, by name case-insensitively, then id. */
function active(db: Kysely<Database>, table: NamedResourceTable, accountId: string) {
  return db
    .selectFrom(table)
    .select(['id', 'name', 'created_at'])
    .where('account_id', '=', accountId)
    .where('active', '=', 1)
    .orderBy(sql`lower(name)`)
    .orderBy('id');
}

export const namedResourceRepository = {
  async listActive(
    db: Kysely<Database>,
    table: NamedResourceTable,
    accountId: string,
  ): Promise<NamedResourceRow[]> {
    return active(db, table, accountId).execute();
  },

  /** The list of `listActive` in chunks: up to `limit` rows after `after`, with their keys. */
  async listActiveAfter(
    db: Kysely<Database>,
    table: NamedResourceTable,
    accountId: string,
    after: NameKey | null,
    limit: number,
  ): Promise<(NamedResourceRow & NameKey)[]> {
    return active(db, table, accountId).select(nameKey).where(afterNameKey(after)).limit(limit).execute();
  },

  async upsertMany(
    db: Kysely<Database>,
    table: NamedResourceTable,
    rows: NamedResourceInput[],
  ): Promise<void> {
    if (rows.length === 0) return;
    await db
      .insertInto(table)
      .values(rows)
      .onConflict((oc) =>
        oc.column('id').doUpdateSet((eb) => ({
          name: eb.ref('excluded.name'),
          active: eb.ref('excluded.active'),
          created_at: eb.ref('excluded.created_at'),
        })),
      )
      .execute();
  },
};
