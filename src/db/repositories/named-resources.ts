import { type ExpressionBuilder, type Kysely, type Selectable, sql } from 'kysely';
import type { Database, DepartmentsTable } from '../schema.ts';

/** Departments and locations share one shape (`LocationsTable` is `DepartmentsTable`) and one set of queries. */
export type NamedResourceTable = 'departments' | 'locations';

export type NamedResourceInput = Omit<Selectable<DepartmentsTable>, 'change_seq' | 'changed_at'>;

/** What the API shows of a department or location (the lists and the changes feed). */
export const PUBLIC_NAMED_RESOURCE_COLUMNS = ['id', 'name', 'created_at'] as const;

/** A department or location as the API shows it. */
export type NamedResourceRow = Pick<NamedResourceInput, (typeof PUBLIC_NAMED_RESOURCE_COLUMNS)[number]>;

/**
 * The departments and locations the public API shows: the active ones. The one statement of the
 * rule: the lists filter by it, and the changes feed turns a row it excludes into a deletion.
 */
export const isPublicNamedResource = (eb: ExpressionBuilder<Database, NamedResourceTable>) =>
  eb('active', '=', 1);

export const namedResourceRepository = {
  /** Active rows of the account, by name case-insensitively, then id. */
  async listActive(
    db: Kysely<Database>,
    table: NamedResourceTable,
    accountId: string,
  ): Promise<NamedResourceRow[]> {
    return db
      .selectFrom(table)
      .select(PUBLIC_NAMED_RESOURCE_COLUMNS)
      .where('account_id', '=', accountId)
      .where(isPublicNamedResource)
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
