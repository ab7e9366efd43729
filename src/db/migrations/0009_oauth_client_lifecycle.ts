import { type Kysely, sql } from 'kysely';

// Nullable columns and an index: the previous release runs on it as before (grants it writes
// meanwhile have no `client_id`).
export const additive = true;

/**
 * OAuth client lifecycle (issue 24):
 *
 * - `previous_secret_hash` / `previous_secret_expires_at` on `oauth_clients`: after a secret
 *   rotation, the old secret's hash and the end of its overlap, so integrations can switch
 *   without an outage.
 * - `client_id` on `oauth_payloads`, from the payload's `clientId`: a client's grants are listed
 *   without parsing every payload. `last_used_at`: on a Grant row, when a token of it was last
 *   issued or presented.
 *
 * Self-contained on purpose: the adapter may change, what this migration did may not.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('oauth_clients').addColumn('previous_secret_hash', 'text').execute();
  await db.schema.alterTable('oauth_clients').addColumn('previous_secret_expires_at', 'text').execute();
  await db.schema.alterTable('oauth_payloads').addColumn('client_id', 'text').execute();
  await db.schema.alterTable('oauth_payloads').addColumn('last_used_at', 'text').execute();
  await db.schema
    .createIndex('oauth_payloads_client_model')
    .on('oauth_payloads')
    .columns(['client_id', 'model'])
    .execute();

  const { rows } = await sql<{ model: string; id: string; payload: string }>`
    select model, id, payload from oauth_payloads where model = 'Grant'`.execute(db);
  for (const row of rows) {
    const { clientId } = JSON.parse(row.payload) as { clientId?: string };
    await sql`update oauth_payloads set client_id = ${clientId ?? null}
      where model = ${row.model} and id = ${row.id}`.execute(db);
  }
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('oauth_payloads_client_model').execute();
  await db.schema.alterTable('oauth_payloads').dropColumn('last_used_at').execute();
  await db.schema.alterTable('oauth_payloads').dropColumn('client_id').execute();
  await db.schema.alterTable('oauth_clients').dropColumn('previous_secret_expires_at').execute();
  await db.schema.alterTable('oauth_clients').dropColumn('previous_secret_hash').execute();
}
