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
import * as webhookPreviousSecrets from './migrations/0011_webhook_previous_secrets.ts';
import * as webhookEndpointBounds from './migrations/0012_webhook_endpoint_bounds.ts';
import * as mailNotices from './migrations/0013_mail_notices.ts';
import * as webhookDeliveryLog from './migrations/0014_webhook_delivery_log.ts';
import { openDatabase } from './database.ts';
import { healthRepository } from './repositories/health.ts';
import { migrationStateRepository } from './repositories/migration-state.ts';
import type { Database } from './schema.ts';
import { storeFor } from './store.ts';
import { isStoreUnavailable } from './store-health.ts';

/**
 * A migration and what it promises the release before it. `additive`: the previous release's code
 * still runs on the schema after it: it adds tables, nullable columns or columns with a default,
 * indexes; fills in values the previous release never reads; drops only what the previous release
 * no longer uses. Not additive: it drops or renames what the previous release reads or writes, or
 * changes what stored values mean (docs/deployment.md, "Upgrades"). Recorded in the database with
 * the migration, so that a server whose code predates it can tell.
 */
export interface ReleaseMigration extends Migration {
  readonly additive: boolean;
}

/**
 * Every migration, in order. Listed here rather than read from disk so that the set is fixed at
 * build time and identical in SQLite and PostgreSQL. Add new ones at the end, never edit old ones.
 */
export const migrations: Record<string, ReleaseMigration> = {
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
  '0011_webhook_previous_secrets': webhookPreviousSecrets,
  '0012_webhook_endpoint_bounds': webhookEndpointBounds,
  '0013_mail_notices': mailNotices,
  '0014_webhook_delivery_log': webhookDeliveryLog,
};

export interface MigrationReport {
  /** The migrations this run applied, in order. */
  applied: string[];
  /**
   * Migrations applied by a newer release, unknown to this code and all additive: it runs on their
   * schema as it did before them.
   */
  newer: string[];
}

export interface MigrateOptions {
  /** Told once when another process holds the migration lock and this one waits for it. */
  onWait?: () => void;
}

/**
 * Runs `work` on one connection holding the migration lock, so that processes starting at once
 * migrate one after the other and each sees what the one before it applied.
 *
 * Which lock that is, is the store's (`MigrationDialect.withMigrationLock`): PostgreSQL's advisory
 * lock, SQLite's write lock around the check and every migration.
 */
async function withMigrationLock<T>(
  db: Kysely<Database>,
  { onWait }: MigrateOptions,
  work: (connection: Kysely<Database>) => Promise<T>,
): Promise<T> {
  return db
    .connection()
    .execute((connection) =>
      storeFor(connection).migrations.withMigrationLock(connection, onWait, () => work(connection)),
    );
}

/**
 * What this code may do with a database where `executed` ran and `markers` says which are
 * additive: the migrations it would apply, and those of a newer release it runs beside. Throws,
 * naming the migration, when the schema is newer than this code and not every newer migration is
 * additive.
 */
function judge(executed: string[], markers: Map<string, boolean>): { pending: string[]; newer: string[] } {
  const done = new Set(executed);
  const pending = Object.keys(migrations)
    .sort()
    .filter((name) => !done.has(name));
  const newer = executed.filter((name) => !Object.hasOwn(migrations, name)).sort();
  if (newer.length === 0) return { pending, newer };
  const blocking = newer.find((name) => markers.get(name) !== true);
  if (blocking !== undefined) {
    throw new Error(
      `the database schema is newer than this release: migration ${blocking} is not marked additive, ` +
        'so this release cannot run on it; run the release that applied it, or a newer one',
    );
  }
  if (pending.length > 0) {
    throw new Error(
      `the database has migrations of a newer release (${newer.join(', ')}) but not this release's ` +
        `${pending[0]}: run a release that has them all`,
    );
  }
  return { pending, newer };
}

/** `migrations`, each recording its marker in the transaction that applies it. */
function recordingMarkers(): Record<string, Migration> {
  return Object.fromEntries(
    Object.entries(migrations).map(([name, migration]) => [
      name,
      {
        async up(db: Kysely<unknown>) {
          await migration.up(db);
          await migrationStateRepository.recordMarker(db, name, migration.additive, new Date().toISOString());
        },
        down: migration.down,
      },
    ]),
  );
}

/**
 * Applies pending migrations under the migration lock; throws with the failing migration's name
 * and cause, or (changing nothing) when the schema is newer than this code and not every newer
 * migration is additive.
 */
export async function migrateToLatest(
  db: Kysely<Database>,
  options: MigrateOptions = {},
): Promise<MigrationReport> {
  return withMigrationLock(db, options, async (connection) => {
    await migrationStateRepository.createMarkersTable(connection);
    const executed = await migrationStateRepository.executedNames(connection);
    const markers = await migrationStateRepository.additiveMarkers(connection);
    // Migrations applied before markers were recorded (or by Kysely's Migrator alone) get this
    // code's, which is theirs: a migration is never edited once released.
    const at = new Date().toISOString();
    for (const name of executed) {
      const migration = migrations[name];
      if (migration !== undefined && !markers.has(name)) {
        await migrationStateRepository.recordMarker(connection, name, migration.additive, at);
      }
    }
    const { pending, newer } = judge(executed, markers);
    if (pending.length === 0) return { applied: [], newer };

    const migrator = new Migrator({
      db: connection,
      provider: { getMigrations: async () => recordingMarkers() },
    });
    const { error, results } = await migrator.migrateToLatest();
    const failed = results?.find((r) => r.status === 'Error');
    if (error !== undefined) {
      // A store that cannot be reached is not a migration's failure: its own error says so.
      if (isStoreUnavailable(error)) throw error;
      const cause = error instanceof Error ? error.message : String(error);
      throw new Error(`migration ${failed?.migrationName ?? '(unknown)'} failed: ${cause}`, { cause: error });
    }
    return {
      applied: (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName),
      newer,
    };
  });
}

/**
 * For a server that does not migrate (MIGRATE_ON_START=false): changes nothing, and throws with
 * one line naming `safety-api migrate` when a migration of this release is pending, or when the
 * schema is newer than this code and not every newer migration is additive.
 */
export async function checkMigrated(databaseUrl: string): Promise<MigrationReport> {
  const handle = openDatabase(databaseUrl);
  try {
    const executed = await migrationStateRepository.executedNames(handle.db);
    const markers = await migrationStateRepository.additiveMarkers(handle.db);
    const { pending, newer } = judge(executed, markers);
    if (pending.length > 0) {
      const list = pending.length === 1 ? pending[0] : `${pending[0]} … ${pending.at(-1)}`;
      throw new Error(
        `${pending.length} migration${pending.length === 1 ? ' is' : 's are'} pending (${list}) and ` +
          'MIGRATE_ON_START=false: run "safety-api migrate" with this release first',
      );
    }
    return { applied: [], newer };
  } finally {
    await handle.destroy();
  }
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
export async function migrateThrough(
  databaseUrl: string,
  migrationUrl: string,
  options: MigrateOptions = {},
): Promise<MigrationReport> {
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
    return await migrateToLatest(handle.db, options);
  } finally {
    await handle.destroy();
  }
}
