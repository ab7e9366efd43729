import type { Kysely } from 'kysely';

// Admin panel sessions live in the database so that they survive a restart and are seen by every
// instance behind a load balancer. Only a SHA-256 hash of the session id is stored.

// A new table: the previous release never reads it.
export const additive = true;

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('admin_sessions')
    .addColumn('id_hash', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('csrf_token', 'text', (c) => c.notNull())
    .addColumn('flash', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('last_seen_at', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('admin_sessions_expires').on('admin_sessions').column('expires_at').execute();
  await db.schema.createIndex('admin_sessions_user').on('admin_sessions').column('user_id').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('admin_sessions').execute();
}
