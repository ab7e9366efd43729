import type { Kysely } from 'kysely';

// New tables, nullable columns and indexes; the index it drops is replaced by one leading with the
// same column, so every query of the previous release keeps one.
export const additive = true;

/**
 * Key usage, key rolls, and finding keys among thousands (issue 24).
 *
 * - `key_usage`: per key and hour (ISO start of the hour), the requests answered 2xx/304 (`ok`),
 *   4xx but 429 (`client_errors`) and 429 (`rate_limited`). Instances add their counts to the same
 *   row, so the rows are the sum over every instance. Kept 30 days.
 * - `rolled_from` / `rolled_to` on `api_keys`: the key a roll replaced and the key that replaced it.
 * - Indexes for the panel's keys list: the default order (newest first) and "last used" both read
 *   an account's keys in index order, so a page of 50 out of 10,000 reads about 50 entries.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('key_usage')
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('hour', 'text', (c) => c.notNull())
    .addColumn('ok', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('client_errors', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('rate_limited', 'integer', (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('key_usage_pkey', ['key_id', 'hour'])
    .execute();
  // The purge deletes by age across all keys.
  await db.schema.createIndex('key_usage_hour').on('key_usage').column('hour').execute();

  await db.schema.alterTable('api_keys').addColumn('rolled_from', 'text').execute();
  await db.schema.alterTable('api_keys').addColumn('rolled_to', 'text').execute();

  await db.schema.dropIndex('api_keys_account').execute();
  await db.schema
    .createIndex('api_keys_account_created')
    .on('api_keys')
    .columns(['account_id', 'created_at', 'id'])
    .execute();
  await db.schema
    .createIndex('api_keys_account_last_used')
    .on('api_keys')
    .columns(['account_id', 'last_used_at', 'id'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('api_keys_account_last_used').execute();
  await db.schema.dropIndex('api_keys_account_created').execute();
  await db.schema.createIndex('api_keys_account').on('api_keys').column('account_id').execute();
  await db.schema.alterTable('api_keys').dropColumn('rolled_to').execute();
  await db.schema.alterTable('api_keys').dropColumn('rolled_from').execute();
  await db.schema.dropTable('key_usage').execute();
}
