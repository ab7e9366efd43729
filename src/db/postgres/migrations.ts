import { type Kysely, sql } from 'kysely';
import type { Database } from '../schema.ts';
import type { MigrationDialect } from '../store.ts';

/**
 * The key of Kysely's own PostgreSQL advisory lock (postgres-adapter.js), which its Migrator takes
 * on its connection: held here on the same connection first (session locks nest), so that every
 * migrating process, whether it runs this code or only Kysely's, waits for the one before it.
 */
const KYSELY_LOCK_ID = '3853314791062309107';
/** How long a process waits for another one's migrations (PostgreSQL): Kysely's own bound. */
const POSTGRES_LOCK_TIMEOUT_MS = 60 * 60 * 1000;

/** Takes the migration lock at once if it is free; `false` if another session holds it. */
async function tryLock(db: Kysely<Database>): Promise<boolean> {
  const { rows } = await sql<{ locked: boolean }>`
    select pg_try_advisory_lock(${sql.lit(KYSELY_LOCK_ID)}::bigint) as locked`.execute(db);
  return rows[0]?.locked === true;
}

/** Waits for the migration lock (up to an hour, as Kysely's Migrator does). */
async function lock(db: Kysely<Database>): Promise<void> {
  await sql`
    with set_timeout as (
      select set_config('lock_timeout', ${sql.lit(String(POSTGRES_LOCK_TIMEOUT_MS))}, true) as config_val
    )
    select pg_advisory_lock(${sql.lit(KYSELY_LOCK_ID)}::bigint) from set_timeout`.execute(db);
}

async function unlock(db: Kysely<Database>): Promise<void> {
  await sql`select pg_advisory_unlock(${sql.lit(KYSELY_LOCK_ID)}::bigint)`.execute(db);
}

export const postgresMigrations: MigrationDialect = {
  generatedKey: (column) => column.primaryKey().generatedAlwaysAsIdentity(),

  async tableExists(db, table) {
    const { rows } = await sql<{ present: boolean }>`
      select to_regclass(${table}) is not null as present`.execute(db);
    return rows[0]?.present === true;
  },

  /**
   * Kysely's own advisory lock, taken on the connection the Migrator then runs on (a session's
   * advisory locks nest). Released by the session's end if the process dies.
   */
  async withMigrationLock<T>(
    connection: Kysely<Database>,
    onWait: (() => void) | undefined,
    work: () => Promise<T>,
  ): Promise<T> {
    if (!(await tryLock(connection))) {
      onWait?.();
      await lock(connection);
    }
    let result: T;
    try {
      result = await work();
    } catch (error) {
      // The migration's own error is the one to tell, whatever happens to the unlock.
      await unlock(connection).catch(() => {});
      throw error;
    }
    await unlock(connection);
    return result;
  },
};
