import { type Kysely, type Migration, Migrator } from 'kysely';
import * as initial from './migrations/0001_initial.ts';
import * as adminSessions from './migrations/0002_admin_sessions.ts';
import * as oauth from './migrations/0003_oauth.ts';
import * as dropIncidentsCreatedIndex from './migrations/0004_drop_incidents_created_index.ts';
import * as oauthHashedIds from './migrations/0005_oauth_hashed_ids.ts';
import * as changes from './migrations/0006_changes.ts';
import type { Database } from './schema.ts';

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
};

/** Applies pending migrations; throws with the failing migration's name and cause. */
export async function migrateToLatest(db: Kysely<Database>): Promise<string[]> {
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error !== undefined) {
    const cause = error instanceof Error ? error.message : String(error);
    throw new Error(`migration ${failed?.migrationName ?? '(unknown)'} failed: ${cause}`);
  }
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
