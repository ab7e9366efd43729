import type { Kysely, Selectable } from 'kysely';
import type { Database, KeyUsageTable } from '../schema.ts';
import { storeFor } from '../store.ts';
import { repository } from '../store-context.ts';

export type KeyUsageRow = Selectable<KeyUsageTable>;

/** Rows per statement: 5 parameters each, well under SQLite's and PostgreSQL's limits. */
const ROWS_PER_STATEMENT = 500;

export const keyUsageRepository = repository('keyUsageRepository', {
  /**
   * Adds the counts to the hourly rows (creating them), so that the counts of every instance, and
   * of every flush of one instance, sum. Counts of a key that no longer exists (erased with its
   * account by `accounts delete` after they were taken) are dropped, not written back. Run it in a
   * transaction: on PostgreSQL the keys counted are locked (FOR KEY SHARE) until it commits, so an
   * erasure, which locks them FOR UPDATE, either waits for the flush and then deletes its rows, or
   * goes first and the flush finds the keys gone.
   */
  async add(db: Kysely<Database>, counted: KeyUsageRow[]): Promise<void> {
    const keyIds = [...new Set(counted.map((row) => row.key_id))];
    const existing = new Set<string>();
    for (let start = 0; start < keyIds.length; start += ROWS_PER_STATEMENT) {
      const query = db
        .selectFrom('api_keys')
        .select('id')
        .where('id', 'in', keyIds.slice(start, start + ROWS_PER_STATEMENT));
      for (const { id } of await storeFor(db).lockRows(query, 'key share').execute()) existing.add(id);
    }
    const rows = counted.filter((row) => existing.has(row.key_id));
    for (let start = 0; start < rows.length; start += ROWS_PER_STATEMENT) {
      await db
        .insertInto('key_usage')
        .values(rows.slice(start, start + ROWS_PER_STATEMENT))
        .onConflict((oc) =>
          oc.columns(['key_id', 'hour']).doUpdateSet((eb) => ({
            ok: eb('key_usage.ok', '+', eb.ref('excluded.ok')),
            client_errors: eb('key_usage.client_errors', '+', eb.ref('excluded.client_errors')),
            rate_limited: eb('key_usage.rate_limited', '+', eb.ref('excluded.rate_limited')),
          })),
        )
        .execute();
    }
  },

  /** The key's rows from the hour `since` (inclusive), oldest first. */
  async listSince(db: Kysely<Database>, keyId: string, since: string): Promise<KeyUsageRow[]> {
    return db
      .selectFrom('key_usage')
      .selectAll()
      .where('key_id', '=', keyId)
      .where('hour', '>=', since)
      .orderBy('hour')
      .execute();
  },

  /** Deletes the rows of hours before `before`. */
  async purgeBefore(db: Kysely<Database>, before: string): Promise<void> {
    await db.deleteFrom('key_usage').where('hour', '<', before).execute();
  },
});
