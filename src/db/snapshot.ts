import SqliteDatabase from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import type pg from 'pg';
import type { Database } from './schema.ts';
import { withStatementCache } from './statement-cache.ts';

/**
 * Snapshots: the whole database as it stood at one moment, read on a connection of its own, for a
 * read that spans many queries and a long time (an export streams millions of rows). The server's
 * own connection stays free meanwhile, and writers are never blocked: SQLite in WAL mode and
 * PostgreSQL both keep what a reader's transaction sees without locking anything.
 */
export interface Snapshot {
  /** Every query on it sees the same committed state, the one of its first read. */
  readonly db: Kysely<Database>;
  /** Ends the transaction and gives the connection back. Called once, whatever happened. */
  release(): Promise<void>;
}

export interface SnapshotSource {
  open(): Promise<Snapshot>;
  /** Closes what the source keeps open between snapshots (a pool). */
  close(): Promise<void>;
}

const sources = new WeakMap<Kysely<Database>, SnapshotSource>();

/** Called by the code that opens a database handle (database.ts), for `openSnapshot` to find. */
export function registerSnapshots(db: Kysely<Database>, source: SnapshotSource): void {
  sources.set(db, source);
}

/** A new snapshot of the database behind `db`. */
export function openSnapshot(db: Kysely<Database>): Promise<Snapshot> {
  const source = sources.get(db);
  if (source === undefined) throw new Error('snapshots: this database handle was not opened by database.ts');
  return source.open();
}

/**
 * SQLite file: a read-only connection per snapshot. In WAL mode a read transaction sees the
 * database as of its first read until it ends, while writers go on appending to the WAL.
 */
export function sqliteSnapshots(path: string): SnapshotSource {
  return {
    async open() {
      // timeout 0: a lock (only seen while another connection recovers the WAL) fails at once,
      // as a store outage, instead of waiting on the event loop.
      const connection = new SqliteDatabase(path, { readonly: true, fileMustExist: true, timeout: 0 });
      const db = new Kysely<Database>({
        dialect: new SqliteDialect({ database: withStatementCache(connection) }),
      });
      try {
        await sql`begin`.execute(db);
      } catch (error) {
        await db.destroy();
        throw error;
      }
      // Closing the connection ends its transaction.
      return { db, release: () => db.destroy() };
    },
    async close() {},
  };
}

/**
 * In-memory SQLite lives in the server's one connection, which no other process can reach and
 * through which the server writes no public data: that connection already reads a fixed state.
 */
export function sharedSnapshots(db: Kysely<Database>): SnapshotSource {
  return {
    async open() {
      return { db, release: async () => {} };
    },
    async close() {},
  };
}

/**
 * PostgreSQL: a connection of `pool` (a pool of its own, so that long exports never hold the
 * connections requests are served from) in a REPEATABLE READ transaction, whose snapshot is taken
 * at its first statement.
 */
export function postgresSnapshots(pool: pg.Pool): SnapshotSource {
  return {
    async open() {
      const client = await pool.connect();
      // Kysely releases its connection after every query; this one stays checked out until the
      // snapshot ends.
      const held = {
        query: client.query.bind(client),
        release() {},
      };
      const db = new Kysely<Database>({
        dialect: new PostgresDialect({ pool: { connect: async () => held, end: async () => {} } }),
      });
      let healthy = true;
      const release = async () => {
        if (healthy) await sql`rollback`.execute(db).catch(() => (healthy = false));
        // A connection that failed is closed rather than handed to the next snapshot.
        client.release(!healthy);
      };
      try {
        await sql`begin isolation level repeatable read read only`.execute(db);
      } catch (error) {
        healthy = false;
        await release();
        throw error;
      }
      return { db, release };
    },
    close: () => pool.end(),
  };
}
