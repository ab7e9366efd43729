import type { Kysely } from 'kysely';

// Drops the index the previous release's re-ranking reads by: without it, every re-ranking of that
// release would sort all of an account's incidents.
export const additive = false;

/**
 * Drops the (account_id, created_at, id) index of incidents. Reads page by `position`, so only
 * re-ranking used it, and that runs only when an import arrives out of paging order; meanwhile
 * every incident insert paid for it (about a quarter of SQLite's work per row in a bulk import).
 * Re-ranking now sorts the account's rows instead, and the newest key is the last position's.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('incidents_account_created').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('incidents_account_created')
    .on('incidents')
    .columns(['account_id', 'created_at', 'id'])
    .execute();
}
