import { type Kysely, type Migration, Migrator } from 'kysely';
import * as initial from './migrations/0001_initial.ts';
import * as adminSessions from './migrations/0002_admin_sessions.ts';
import * as oauth from './migrations/0003_oauth.ts';
import * as dropIncidentsCreatedIndex from './migrations/0004_drop_incidents_created_index.ts';
import * as oauthHashedIds from './migrations/0005_oauth_hashed_ids.ts';
import * as changes from './migrations/0006_changes.ts';
import * as webhooks from './migrations/0007_webhooks.ts';
import * as keyUsage from './migrations/0008_key_usage.ts';
import * as oauthClientLifecycle from './migrations/0009_oauth_client_lifecycle.ts';
import * as webhookAcknowledged from './migrations/0010_webhook_acknowledged.ts';
import { openDatabase } from './database.ts';
import { healthRepository } from './repositories/health.ts';
import type { Database } from './schema.ts';
import { isStoreUnavailable } from './store-health.ts';

/**
 * Every migration, in order. Listed here rather than read from disk so that the set is fixed at
 * build time and identical in SQLite and PostgreSQL. Add new ones at the end, never edit old ones.
 */
export const migrations: Record<string, Migration> = {
  '0001_initial': initial,
  '0002_admin_sessions': adminSessions,
  '0003_oauth': oauth,
  '0004_drop_incidents_created_index': dropIncidentsCreatedIndex,
  '0005_oauth_hashed_ids': oauthHashedIds,
  '0006_changes': changes,
  '0007_webhooks': webhooks,
  '0008_key_usage': keyUsage,
  '0009_oauth_client_lifecycle': oauthClientLifecycle,
  '0010_webhook_acknowledged': webhookAcknowledged,
};

/** Applies pending migrations; throws with the failing migration's name and cause. */
export async function migrateToLatest(db: Kysely<Database>): Promise<string[]> {
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error !== undefined) {
    // A store that cannot be reached is not a migration's failure: its own error says so.
    if (isStoreUnavailable(error)) throw error;
    const cause = error instanceof Error ? error.message : String(error);
    throw new Error(`migration ${failed?.migrationName ?? '(unknown)'} failed: ${cause}`, { cause: error });
  }
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/**
 * Applies pending migrations through `migrationUrl` (MIGRATION_DATABASE_URL, else `databaseUrl`),
 * on a handle of its own, without the server's deadlines: a migration may take longer than one
 * request's store call should.
 *
 * Kysely's migrator holds a session-level advisory lock from before its transaction to after it,
 * which a transaction-mode pooler (PgBouncer) may run on three different server connections,
 * leaving the lock held; a direct or session-mode URL for migrations avoids that. A different URL
 * must reach the same database: checked by the name the server gives it, before anything is applied.
 */
export async function migrateThrough(databaseUrl: string, migrationUrl: string): Promise<string[]> {
  const handle = openDatabase(migrationUrl);
  try {
    if (migrationUrl !== databaseUrl) {
      const served = openDatabase(databaseUrl);
      try {
        const [migrating, serving] = await Promise.all([
          healthRepository.postgresDatabaseName(handle.db),
          healthRepository.postgresDatabaseName(served.db),
        ]);
        if (migrating !== serving) {
          throw new Error(
            `MIGRATION_DATABASE_URL reaches database "${migrating}" but DATABASE_URL reaches "${serving}": ` +
              'they must be the same database; nothing was migrated',
          );
        }
      } finally {
        await served.destroy();
      }
    }
    return await migrateToLatest(handle.db);
  } finally {
    await handle.destroy();
  }
}
