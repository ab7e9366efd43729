import { type Kysely, type Selectable, sql } from 'kysely';
import type { Database, DepartmentsTable } from '../schema.ts';

/** Departments and locations share one shape (`LocationsTable` is `DepartmentsTable`) and one set of queries. */
export type NamedResourceTable = 'departments' | 'locations';

export type NamedResourceInput = Omit<Selectable<DepartmentsTable>, 'change_seq' | 'changed_at'>;

/** A department or location as the API shows it. */
export type NamedResourceRow = Pick<NamedResourceInput, 'id' | 'name' | 'created_at'>;

export const namedResourceRepository = {
  /** Active rows of the account, by name case-insensitively, then id. */
  async listActive(
    db: Kysely<Database>,
    table: NamedResourceTable,
    accountId: string,
  ): Promise<NamedResourceRow[]> {
    return db
      .selectFrom(table)
      .select(['id', 'name', 'created_at'])
      .where('account_id', '=', accountId)
      .where('active', '=', 1)
      .orderBy(sql`lower(name)`)
      .orderBy('id')
      .execute();
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
