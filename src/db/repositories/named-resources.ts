import { type ExpressionBuilder, type Kysely, type Selectable, sql } from 'kysely';
import type { Database, DepartmentsTable } from '../schema.ts';
import { anyColumnChanged, type ChangeStamp, enteredView } from './change-stamp.ts';
import { afterNameKey, type NameKey, nameKey } from './by-name.ts';
import { repository } from '../store-context.ts';

/** Departments and locations share one shape (`LocationsTable` is `DepartmentsTable`) and one set of queries. */
export type NamedResourceTable = 'departments' | 'locations';

export type NamedResourceInput = Omit<
  Selectable<DepartmentsTable>,
  'change_seq' | 'changed_at' | 'created_seq'
>;

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

/** Active rows of the account, by name case-insensitively, then id. */
function active(db: Kysely<Database>, table: NamedResourceTable, accountId: string) {
  return db
    .selectFrom(table)
    .select(PUBLIC_NAMED_RESOURCE_COLUMNS)
    .where('account_id', '=', accountId)
    .where(isPublicNamedResource)
    .orderBy(sql`lower(name)`)
    .orderBy('id');
}

export const namedResourceRepository = repository('namedResourceRepository', {
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

  /** Inserts or updates by id; a row whose fields are unchanged keeps its place in the feed. */
  async upsertMany(
    db: Kysely<Database>,
    table: NamedResourceTable,
    rows: (NamedResourceInput & ChangeStamp)[],
  ): Promise<void> {
    if (rows.length === 0) return;
    await db
      .insertInto(table)
      .values(rows)
      .onConflict((oc) =>
        oc
          .column('id')
          .doUpdateSet((eb) => ({
            name: eb.ref('excluded.name'),
            active: eb.ref('excluded.active'),
            created_at: eb.ref('excluded.created_at'),
            change_seq: eb.ref('excluded.change_seq'),
            changed_at: eb.ref('excluded.changed_at'),
            created_seq: enteredView(table, (row) => sql<boolean>`${sql.ref(`${row}.active`)} = 1`),
          }))
          .where(anyColumnChanged(table, ['name', 'active', 'created_at'])),
      )
      .execute();
  },
});
