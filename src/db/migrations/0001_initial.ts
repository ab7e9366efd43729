import { type Kysely, sql } from 'kysely';
import { storeFor } from '../store.ts';

// Timestamps are ISO 8601 strings and flags are 0/1 integers in both stores (see schema.ts).

// The first tables: there is no release before it.
export const additive = true;

export async function up(db: Kysely<unknown>): Promise<void> {
  // The store hands out the values: an identity column, or an AUTOINCREMENT key.
  const { generatedKey } = storeFor(db).migrations;

  await db.schema
    .createTable('accounts')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('api_access', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('rate_limit_per_hour', 'integer', (c) => c.notNull().defaultTo(1000))
    .addColumn('incident_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('data_version', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();

  for (const table of ['departments', 'locations']) {
    await db.schema
      .createTable(table)
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('active', 'integer', (c) => c.notNull().defaultTo(1))
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex(`${table}_account_name`)
      .on(table)
      .columns(['account_id', 'active'])
      .execute();
  }

  await db.schema
    .createTable('users')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('email', 'text', (c) => c.notNull())
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('department', 'text')
    .addColumn('job_title', 'text')
    .addColumn('active', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('vendor_support', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('password_hash', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('users_account').on('users').columns(['account_id', 'active']).execute();
  // Sign-in is by email, so an email names one user across the whole service.
  await db.schema
    .createIndex('users_email')
    .on('users')
    .expression(sql`lower(email)`)
    .unique()
    .execute();

  await db.schema
    .createTable('incidents')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('incident_number', 'text', (c) => c.notNull())
    .addColumn('description', 'text')
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('severity_likelihood', 'integer')
    .addColumn('severity_impact', 'integer')
    .addColumn('location', 'text')
    .addColumn('incident_date', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addColumn('position', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .createIndex('incidents_account_position')
    .on('incidents')
    .columns(['account_id', 'position'])
    .execute();
  await db.schema
    .createIndex('incidents_account_created')
    .on('incidents')
    .columns(['account_id', 'created_at', 'id'])
    .execute();

  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('prefix', 'text', (c) => c.notNull())
    .addColumn('key_hash', 'text', (c) => c.notNull().unique())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text')
    .addColumn('last_used_at', 'text')
    .addColumn('created_by', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('api_keys_account').on('api_keys').column('account_id').execute();

  await db.schema
    .createTable('api_key_events')
    .addColumn('id', 'integer', generatedKey)
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('actor', 'text', (c) => c.notNull())
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('detail', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('api_key_events_account')
    .on('api_key_events')
    .columns(['account_id', 'id'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of [
    'api_key_events',
    'api_keys',
    'incidents',
    'users',
    'locations',
    'departments',
    'accounts',
  ]) {
    await db.schema.dropTable(table).execute();
  }
}
