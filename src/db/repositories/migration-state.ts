import { type Kysely, sql } from 'kysely';
import { storeBehind } from '../database.ts';
import type { Database } from '../schema.ts';
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

/**
 * The key of Kysely's own PostgreSQL advisory lock (postgres-adapter.js), which its Migrator takes
 * on its connection: held here on the same connection first (session locks nest), so that every
 * migrating process, whether it runs this code or only Kysely's, waits for the one before it.
 */
const KYSELY_LOCK_ID = '3853314791062309107';
/** How long a process waits for another one's migrations (PostgreSQL): Kysely's own bound. */
const POSTGRES_LOCK_TIMEOUT_MS = 60 * 60 * 1000;

async function tableExists(db: Kysely<Database>, table: string): Promise<boolean> {
  if (storeBehind(db) === 'sqlite') {
    const { rows } = await sql<{ name: string }>`
      select name from sqlite_master where type = 'table' and name = ${table}`.execute(db);
    return rows.length > 0;
  }
  const { rows } = await sql<{ present: boolean }>`
    select to_regclass(${table}) is not null as present`.execute(db);
  return rows[0]?.present === true;
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

  /** Takes the migration lock at once if it is free; `false` if another session holds it. */
  async tryLockPostgres(db: Kysely<Database>): Promise<boolean> {
    const { rows } = await sql<{ locked: boolean }>`
      select pg_try_advisory_lock(${sql.lit(KYSELY_LOCK_ID)}::bigint) as locked`.execute(db);
    return rows[0]?.locked === true;
  },

  /** Waits for the migration lock (up to an hour, as Kysely's Migrator does). */
  async lockPostgres(db: Kysely<Database>): Promise<void> {
    await sql`
      with set_timeout as (
        select set_config('lock_timeout', ${sql.lit(String(POSTGRES_LOCK_TIMEOUT_MS))}, true) as config_val
      )
      select pg_advisory_lock(${sql.lit(KYSELY_LOCK_ID)}::bigint) from set_timeout`.execute(db);
  },

  async unlockPostgres(db: Kysely<Database>): Promise<void> {
    await sql`select pg_advisory_unlock(${sql.lit(KYSELY_LOCK_ID)}::bigint)`.execute(db);
  },

  /**
   * SQLite's one write lock, as the migrations' transaction: BEGIN IMMEDIATE takes it or fails at
   * once with SQLITE_BUSY when `waitMs` is 0 (another process writes), or waits up to `waitMs`.
   */
  async beginSqliteLock(db: Kysely<Database>, waitMs: number): Promise<void> {
    await sql.raw(`pragma busy_timeout = ${Math.max(0, Math.floor(waitMs))}`).execute(db);
    await sql`begin immediate`.execute(db);
  },

  async commitSqlite(db: Kysely<Database>): Promise<void> {
    await sql`commit`.execute(db);
  },

  async rollbackSqlite(db: Kysely<Database>): Promise<void> {
    await sql`rollback`.execute(db);
  },

  /** The busy timeout the connection had (`beginSqliteLock` changes it); restored with `restoreSqliteBusyTimeout`. */
  async sqliteBusyTimeout(db: Kysely<Database>): Promise<number> {
    const { rows } = await sql<{ timeout: number }>`pragma busy_timeout`.execute(db);
    return Number(rows[0]?.timeout ?? 0);
  },

  async restoreSqliteBusyTimeout(db: Kysely<Database>, ms: number): Promise<void> {
    await sql.raw(`pragma busy_timeout = ${Math.max(0, Math.floor(ms))}`).execute(db);
  },
});
