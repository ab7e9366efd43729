import type { CompiledQuery, Kysely } from 'kysely';
import type { Database } from './schema.ts';

/**
 * Snapshots: the whole database as it stood at one moment, read on a connection of its own, for a
 * read that spans many queries and a long time (an export streams millions of rows). The server's
 * own connection stays free meanwhile, and writers are never blocked: SQLite in WAL mode and
 * PostgreSQL both keep what a reader's transaction sees without locking anything.
 */
export interface Snapshot {
  /** Every query on it sees the same committed state, the one of its first read. */
  readonly db: Kysely<Database>;
  /**
   * PostgreSQL: the rows of `query` in COPY's text format (`COPY (…) TO STDOUT`), streamed with
   * backpressure, for a reader that turns them into bytes without a row object each
   * (src/db/copy-ndjson.ts). Null where the store has no COPY (SQLite).
   */
  readonly copyOut: ((query: CompiledQuery) => AsyncGenerator<Buffer>) | null;
  /** Ends the transaction and gives the connection back. Called once, whatever happened. */
  release(): Promise<void>;
}

/**
 * Where a store's snapshots come from (`Store.snapshots`): `src/db/sqlite/snapshots.ts`,
 * `src/db/postgres/snapshots.ts`.
 */
export interface SnapshotSource {
  open(): Promise<Snapshot>;
  /** Closes what the source keeps open between snapshots (a pool). */
  close(): Promise<void>;
}
