import type { Kysely, Selectable } from 'kysely';
import type { Database, KeyUsageTable } from '../schema.ts';
import { repository } from '../store-context.ts';

export type KeyUsageRow = Selectable<KeyUsageTable>;

/** Rows per statement: 5 parameters each, well under SQLite's and PostgreSQL's limits. */
const ROWS_PER_STATEMENT = 500;

export const keyUsageRepository = repository('keyUsageRepository', {
  /**
   * Adds the counts to the hourly rows (creating them), so that the counts of every instance, and
   * of every flush of one instance, sum.
   */
  async add(db: Kysely<Database>, rows: KeyUsageRow[]): Promise<void> {
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
