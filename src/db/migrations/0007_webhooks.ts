import { type Kysely, sql } from 'kysely';
import { storeFor } from '../store.ts';

/**
 * Webhooks (docs/design.md, "Webhooks"; docs/webhooks.md) and one audit trail.
 *
 * - `webhook_endpoints`: per account, a URL, an event filter, its signing secrets (encrypted), its
 *   state and its position in the account's changes feed (the seq of the last change delivered),
 *   the retry state of the change it is trying to deliver, and the lease of the one instance that
 *   delivers for it.
 * - `webhook_attempts`: the delivery log, the latest attempts per endpoint.
 * - `created_seq` on every public record: the seq at which the record last entered the public view
 *   (inserted, or back from a deletion), so that a change after a receiver's position can be told
 *   apart as `created` (the receiver never saw the record in this life) or `updated`.
 * - `api_key_events` becomes `audit_events`, with the kind and id of what was changed, so that the
 *   keys' and the endpoints' histories are one trail.
 */

const RECORD_TABLES = ['incidents', 'users', 'departments', 'locations'] as const;

// Renames `api_key_events` and its `key_id`, which the previous release writes.
export const additive = false;

export async function up(db: Kysely<unknown>): Promise<void> {
  // The store hands out the values: an identity column, or an AUTOINCREMENT key.
  const { generatedKey } = storeFor(db).migrations;

  for (const table of RECORD_TABLES) {
    await db.schema
      .alterTable(table)
      .addColumn('created_seq', 'integer', (c) => c.notNull().defaultTo(0))
      .execute();
    await sql`update ${sql.table(table)} set created_seq = change_seq`.execute(db);
  }

  await db.schema.alterTable('api_key_events').renameTo('audit_events').execute();
  await db.schema.alterTable('audit_events').renameColumn('key_id', 'subject_id').execute();
  await db.schema
    .alterTable('audit_events')
    .addColumn('subject_type', 'text', (c) => c.notNull().defaultTo('api_key'))
    .execute();

  await db.schema
    .createTable('webhook_endpoints')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('description', 'text')
    .addColumn('events', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('disabled_reason', 'text')
    .addColumn('secret', 'text', (c) => c.notNull())
    .addColumn('previous_secret', 'text')
    .addColumn('previous_secret_expires_at', 'text')
    .addColumn('position', 'integer', (c) => c.notNull())
    .addColumn('failing_since', 'text')
    .addColumn('failed_attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', 'text')
    .addColumn('last_attempt_at', 'text')
    .addColumn('last_status', 'integer')
    .addColumn('lease_owner', 'text')
    .addColumn('lease_expires_at', 'text')
    .addColumn('created_by', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('webhook_endpoints_account')
    .on('webhook_endpoints')
    .columns(['account_id', 'created_at'])
    .execute();

  await db.schema
    .createTable('webhook_attempts')
    .addColumn('id', 'integer', generatedKey)
    .addColumn('endpoint_id', 'text', (c) =>
      c.notNull().references('webhook_endpoints.id').onDelete('cascade'),
    )
    .addColumn('webhook_id', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('seq', 'integer')
    .addColumn('at', 'text', (c) => c.notNull())
    .addColumn('status', 'integer')
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    .addColumn('error', 'text')
    .execute();
  await db.schema
    .createIndex('webhook_attempts_endpoint')
    .on('webhook_attempts')
    .columns(['endpoint_id', 'id'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('webhook_attempts').execute();
  await db.schema.dropTable('webhook_endpoints').execute();
  await db.schema.alterTable('audit_events').dropColumn('subject_type').execute();
  await db.schema.alterTable('audit_events').renameColumn('subject_id', 'key_id').execute();
  await db.schema.alterTable('audit_events').renameTo('api_key_events').execute();
  for (const table of RECORD_TABLES) await db.schema.alterTable(table).dropColumn('created_seq').execute();
}
