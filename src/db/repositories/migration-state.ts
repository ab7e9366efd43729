import { type Kysely, sql } from 'kysely';
import type { Database } from '../schema.ts';
import { storeFor } from '../store.ts';
import { repository } from '../store-context.ts';

/**
 * What the migration runner (`migrate.ts`) reads and writes besides the migrations themselves:
 * Kysely's record of the migrations executed (`kysely_migration`, written by its Migrator), and
 * `applied_migrations`, whether each one is additive, written in the same transaction as the
 * migration, so that a server whose code does not know a migration can still tell whether it may
 * run on the schema after it.
 */

/** Kysely's table of executed migrations (its Migrator's default name). */
const EXECUTED_TABLE = 'kysely_migration';
const MARKERS_TABLE = 'applied_migrations';

/**
 * The migration runner's own tables (with Kysely's lock table): written when a database is
 * migrated, never part of the data a copy carries.
 */
export const MIGRATION_TABLES: readonly string[] = [EXECUTED_TABLE, 'kysely_migration_lock', MARKERS_TABLE];

function tableExists(db: Kysely<Database>, table: string): Promise<boolean> {
  return storeFor(db).migrations.tableExists(db, table);
}

export const migrationStateRepository = repository('migrationStateRepository', {
  /** The names of the migrations executed on this database; none before the first. */
  async executedNames(db: Kysely<Database>): Promise<string[]> {
    if (!(await tableExists(db, EXECUTED_TABLE))) return [];
    const { rows } = await sql<{ name: string }>`
      select name from ${sql.table(EXECUTED_TABLE)}`.execute(db);
    return rows.map((row) => row.name);
  },

  /** Whether each migration recorded so far is additive, by name. */
  async additiveMarkers(db: Kysely<Database>): Promise<Map<string, boolean>> {
    if (!(await tableExists(db, MARKERS_TABLE))) return new Map();
    const { rows } = await sql<{ name: string; additive: number }>`
      select name, additive from ${sql.table(MARKERS_TABLE)}`.execute(db);
    return new Map(rows.map((row) => [row.name, Number(row.additive) === 1]));
  },

  async createMarkersTable(db: Kysely<Database>): Promise<void> {
    await sql`
      create table if not exists ${sql.table(MARKERS_TABLE)} (
        name varchar(255) not null primary key,
        additive integer not null,
        applied_at varchar(255) not null
      )`.execute(db);
  },

  /** Records (or records again, after a migration was taken down and up) whether `name` is additive. */
  async recordMarker<DB>(db: Kysely<DB>, name: string, additive: boolean, at: string): Promise<void> {
    await sql`
      insert into ${sql.table(MARKERS_TABLE)} (name, additive, applied_at)
      values (${name}, ${additive ? 1 : 0}, ${at})
      on conflict (name) do update set additive = excluded.additive, applied_at = excluded.applied_at`.execute(
      db,
    );
  },
});
