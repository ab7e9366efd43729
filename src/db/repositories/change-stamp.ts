import { type RawBuilder, sql } from 'kysely';

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
}

/** In an upsert's `DO UPDATE … WHERE`: true when `columns` of the stored row differ from the record's. */
export function anyColumnChanged(table: string, columns: readonly string[]): RawBuilder<boolean> {
  const stored = sql.join(columns.map((column) => sql.ref(`${table}.${column}`)));
  const incoming = sql.join(columns.map((column) => sql.ref(`excluded.${column}`)));
  return sql<boolean>`(${stored}) IS DISTINCT FROM (${incoming})`;
}
