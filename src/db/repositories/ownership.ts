import type { Kysely } from 'kysely';
import type { Database } from '../schema.ts';

/** Every table whose rows have a text `id` and belong to an account. */
export type AccountOwnedTable = {
  [T in keyof Database]: Database[T] extends { id: string; account_id: string } ? T : never;
}[keyof Database];

/** For those of `ids` that exist in `table`, the account each belongs to. */
export async function existingOwners(
  db: Kysely<Database>,
  table: AccountOwnedTable,
  ids: string[],
): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const rows = await db.selectFrom(table).select(['id', 'account_id']).where('id', 'in', ids).execute();
  return new Map(rows.map((r) => [r.id, r.account_id]));
}
