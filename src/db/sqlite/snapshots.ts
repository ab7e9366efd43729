import SqliteDatabase from 'better-sqlite3';
import { Kysely, SqliteDialect, sql } from 'kysely';
import type { Database } from '../schema.ts';
import type { SnapshotSource } from '../snapshot.ts';
import { type Store, storeDialect } from '../store.ts';
import { withStatementCache } from './statement-cache.ts';

/**
 * SQLite file: a read-only connection per snapshot. In WAL mode a read transaction sees the
 * database as of its first read until it ends, while writers go on appending to the WAL.
 */
export function sqliteSnapshots(path: string, store: Store): SnapshotSource {
  return {
    async open() {
      // timeout 0: a lock (only seen while another connection recovers the WAL) fails at once,
      // as a store outage, instead of waiting on the event loop.
      const connection = new SqliteDatabase(path, { readonly: true, fileMustExist: true, timeout: 0 });
      const db = new Kysely<Database>({
        dialect: storeDialect(new SqliteDialect({ database: withStatementCache(connection) }), store),
      });
      try {
        await sql`begin`.execute(db);
      } catch (error) {
        await db.destroy();
        throw error;
      }
      // Closing the connection ends its transaction.
      return { db, copyOut: null, release: () => db.destroy() };
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
      return { db, copyOut: null, release: async () => {} };
    },
    async close() {},
  };
}
