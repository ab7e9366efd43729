import type { Kysely } from 'kysely';

// A new table: the previous release runs on it as before (it sends no mail).
export const additive = true;

/**
 * The mails sent to Super Admins (issue 41 item 4; docs/operations.md, "Mail"): one row per event
 * told (an endpoint's failure episode, its disabling, a key's expiry threshold), claimed under a
 * unique key in a transaction before the mail leaves, so that however many instances see the
 * event, one sends it. Erased with the account.
 *
 * Self-contained on purpose: the adapter may change, what this migration did may not.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('mail_notices')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('mail_notices_account').on('mail_notices').column('account_id').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('mail_notices').execute();
}
