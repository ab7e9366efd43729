import type { Kysely } from 'kysely';

// OAuth 2 state lives in the product's database so that every instance behind a load balancer,
// and every restart, sees the same clients, tokens, grants, sessions and signing keys.

// New tables: the previous release never reads them.
export const additive = true;

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('oauth_clients')
    .addColumn('client_id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('redirect_uris', 'text', (c) => c.notNull())
    .addColumn('is_public', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('secret_hash', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('oauth_clients_account').on('oauth_clients').column('account_id').execute();

  // One table for every oidc-provider model (tokens, codes, grants, sessions, interactions).
  await db.schema
    .createTable('oauth_payloads')
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('grant_id', 'text')
    .addColumn('user_code', 'text')
    .addColumn('uid', 'text')
    .addColumn('expires_at', 'text')
    .addColumn('consumed_at', 'text')
    .addPrimaryKeyConstraint('oauth_payloads_pk', ['model', 'id'])
    .execute();
  for (const column of ['grant_id', 'user_code', 'uid', 'expires_at']) {
    await db.schema.createIndex(`oauth_payloads_${column}`).on('oauth_payloads').column(column).execute();
  }

  await db.schema
    .createTable('oauth_keys')
    .addColumn('kind', 'text', (c) => c.primaryKey())
    .addColumn('value', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['oauth_keys', 'oauth_payloads', 'oauth_clients']) {
    await db.schema.dropTable(table).execute();
  }
}
