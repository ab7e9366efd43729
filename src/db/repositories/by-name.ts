import { type Expression, type SqlBool, sql } from 'kysely';

/**
 * Users, departments and locations are listed by name case-insensitively, then id. A walk over
 * such a list in chunks resumes after the last row it read, by that row's key as the store
 * computes it (`lower(name)`: SQLite lowers ASCII only, PostgreSQL every letter).
 */
export interface NameKey {
  name_key: string;
  id: string;
}

/** The store's sort key of a by-name list, selected as `name_key`. */
export const nameKey = sql<string>`lower(name)`.as('name_key');

/** The rows after `after` in by-name order; every row when null. */
export function afterNameKey(after: NameKey | null): Expression<SqlBool> {
  return after === null
    ? sql<SqlBool>`1 = 1`
    : sql<SqlBool>`(lower(name), id) > (${after.name_key}, ${after.id})`;
}
