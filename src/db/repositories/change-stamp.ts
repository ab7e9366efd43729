import { type Kysely, type RawBuilder, sql } from 'kysely';
import type { Database } from '../schema.ts';

/**
 * What the upserts of public records share. An import stamps every record with its place in the
 * changes feed (`change_seq`, `changed_at`); an upsert moves an existing row to its new place only
 * when one of its public columns really changed, so importing the same file twice leaves the feed
 * (and what a client syncing from it must fetch) as it was.
 */

/** Where a record's latest change sits in its account's feed, as the import gives it. */
export interface ChangeStamp {
  change_seq: number;
  changed_at: string;
  /**
   * The seq to keep as the record's `created_seq` if this change brings it into the public view
   * (a new row, or one coming back): the change's own seq. An update of a record already in view
   * keeps the stored one (`enteredView`).
   */
  created_seq: number;
}

/** In an upsert's `DO UPDATE … WHERE`: true when `columns` of the stored row differ from the record's. */
export function anyColumnChanged(table: string, columns: readonly string[]): RawBuilder<boolean> {
  const stored = sql.join(columns.map((column) => sql.ref(`${table}.${column}`)));
  const incoming = sql.join(columns.map((column) => sql.ref(`excluded.${column}`)));
  return sql<boolean>`(${stored}) IS DISTINCT FROM (${incoming})`;
}

/**
 * In an upsert's `DO UPDATE SET created_seq = …`: the incoming change's seq when it brings the row
 * into the public view (`visible` of the stored row false, of the incoming row true), else the
 * stored `created_seq`. `visible` is the view's condition over a row reference (`users.` or
 * `excluded.`).
 */
export function enteredView(
  table: string,
  visible: (row: string) => RawBuilder<boolean>,
): RawBuilder<number> {
  return sql<number>`CASE WHEN NOT (${visible(table)}) AND (${visible('excluded')}) THEN excluded.change_seq ELSE ${sql.ref(`${table}.created_seq`)} END`;
}

/**
 * Takes rows out of the public view (an import's deletion of a user, department or location): the
 * active ones among `refs` become inactive, each at its seq. Returns how many it changed; a row
 * already inactive, or not there, is left alone.
 */
export async function deactivateMany(
  db: Kysely<Database>,
  table: 'users' | 'departments' | 'locations',
  refs: ({ id: string; account_id: string } & ChangeStamp)[],
): Promise<number> {
  let changed = 0;
  for (const ref of refs) {
    const result = await db
      .updateTable(table)
      .set({ active: 0, change_seq: ref.change_seq, changed_at: ref.changed_at })
      .where('id', '=', ref.id)
      .where('account_id', '=', ref.account_id)
      .where('active', '=', 1)
      .executeTakeFirst();
    changed += Number(result.numUpdatedRows);
  }
  return changed;
}
