import { type Kysely, sql } from 'kysely';
import type { Database } from '../schema.ts';
import type { MigrationDialect } from '../store.ts';

/** How long SQLite's busy handler waits for the write lock per try, between which nothing runs. */
const SQLITE_LOCK_TRY_MS = 5000;
/** How long a process waits for another one's migrations on SQLite, as on PostgreSQL (Kysely's bound). */
const SQLITE_LOCK_WAIT_MS = 60 * 60 * 1000;

function isSqliteBusy(error: unknown): boolean {
  return (
    error instanceof Error &&
    'code' in error &&
    typeof error.code === 'string' &&
    error.code.startsWith('SQLITE_BUSY')
  );
}

async function busyTimeout(db: Kysely<Database>): Promise<number> {
  const { rows } = await sql<{ timeout: number }>`pragma busy_timeout`.execute(db);
  return Number(rows[0]?.timeout ?? 0);
}

async function setBusyTimeout(db: Kysely<Database>, ms: number): Promise<void> {
  await sql.raw(`pragma busy_timeout = ${Math.max(0, Math.floor(ms))}`).execute(db);
}

/**
 * SQLite's one write lock, as the migrations' transaction: BEGIN IMMEDIATE takes it or fails at
 * once with SQLITE_BUSY when `waitMs` is 0 (another process writes), or waits up to `waitMs`.
 */
async function beginLocked(db: Kysely<Database>, waitMs: number): Promise<void> {
  await setBusyTimeout(db, waitMs);
  await sql`begin immediate`.execute(db);
}

export const sqliteMigrations: MigrationDialect = {
  generatedKey: (column) => column.primaryKey().autoIncrement(),

  async tableExists(db, table) {
    const { rows } = await sql<{ name: string }>`
      select name from sqlite_master where type = 'table' and name = ${table}`.execute(db);
    return rows.length > 0;
  },

  /**
   * The write lock, as one transaction (BEGIN IMMEDIATE) around the check and every migration:
   * Kysely's Migrator takes no lock and no transaction on SQLite, so two processes could otherwise
   * both apply the same migration, and a failing one would leave half its changes.
   */
  async withMigrationLock<T>(
    connection: Kysely<Database>,
    onWait: (() => void) | undefined,
    work: () => Promise<T>,
  ): Promise<T> {
    const previous = await busyTimeout(connection);
    const deadline = Date.now() + SQLITE_LOCK_WAIT_MS;
    for (let waitMs = 0; ; waitMs = SQLITE_LOCK_TRY_MS) {
      try {
        await beginLocked(connection, waitMs);
        break;
      } catch (error) {
        if (!isSqliteBusy(error) || Date.now() >= deadline) {
          await setBusyTimeout(connection, previous);
          throw error;
        }
        if (waitMs === 0) onWait?.();
      }
    }
    await setBusyTimeout(connection, previous);
    let result: T;
    try {
      result = await work();
    } catch (error) {
      // SQLite may have rolled back already (some errors end the transaction themselves).
      await sql`rollback`.execute(connection).catch(() => {});
      throw error;
    }
    await sql`commit`.execute(connection);
    return result;
  },
};
