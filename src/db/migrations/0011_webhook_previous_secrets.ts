import type { Kysely } from 'kysely';

// A nullable column: the previous release runs on it as before. It reads and writes
// `previous_secret`, which this release keeps writing as the newest of the list.
export const additive = true;

/**
 * Every previous signing secret of a webhook endpoint, each with its own expiry (issue 41,
 * "rotation"): `previous_secrets` on `webhook_endpoints`, a JSON array of
 * `{ "secret": <sealed, as "secret">, "expires_at": <ISO time> }` in the order of the rotations that
 * replaced them, oldest first. Before it only one previous secret was kept (`previous_secret`), so a
 * second rotation within the overlap ended the first secret's signatures at once.
 *
 * `previous_secret` and `previous_secret_expires_at` stay, written as the newest entry of the list,
 * for the previous release during a rolling upgrade. The list holds only while its newest entry is
 * `previous_secret` as written with it: a rotation made by the previous release rewrites that column
 * alone, and its rule (one previous secret) applies until the next rotation by this one.
 * Existing rows start without a list: their `previous_secret`, if any, signs as before.
 *
 * Self-contained on purpose: the adapter may change, what this migration did may not.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_endpoints').addColumn('previous_secrets', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_endpoints').dropColumn('previous_secrets').execute();
}
