import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import {
  type CompiledQuery,
  Kysely,
  PostgresDialect,
  SqliteAdapter,
  SqliteDialect,
  type SqliteDialectConfig,
  sql,
} from 'kysely';
import pg from 'pg';
import { CommitWatch } from './commit-watch.ts';
import type { Database } from './schema.ts';

export type Store = 'sqlite' | 'postgres';

export interface DatabaseHandle {
  db: Kysely<Database>;
  store: Store;
  /**
   * Changes whenever data may have been committed, by anyone (`commit-watch.ts`): SQLite files in
   * WAL mode only; `null` for PostgreSQL and in-memory SQLite, where every read must go to the store.
   */
  commitWatch: CommitWatch | null;
  destroy(): Promise<void>;
}

// COUNT(*) and SUM() come back as int8; every count here fits a double exactly.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

export function storeOf(databaseUrl: string): Store {
  return databaseUrl.startsWith('sqlite:') ? 'sqlite' : 'postgres';
}

function openSqlite(databaseUrl: string): { db: Kysely<Database>; commitWatch: CommitWatch | null } {
  const path = databaseUrl.slice('sqlite:'.length);
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const sqlite = new SqliteDatabase(path);
  // WAL lets the CLI write while the server reads; busy_timeout makes writers queue, not fail.
  const journalMode = sqlite.pragma('journal_mode = WAL', { simple: true });
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('busy_timeout = 5000');
  sqlite.pragma('foreign_keys = ON');
  // Random-UUID primary keys spread inserts and lookups over the whole index: a page cache of 64 MiB
  // (a bound, not an allocation) keeps a million-row import off the disk.
  sqlite.pragma('cache_size = -65536');
  return {
    db: new Kysely<Database>({ dialect: new SqliteDialect({ database: withStatementCache(sqlite) }) }),
    // An in-memory database answers `memory`: it has no WAL and no other connection.
    commitWatch: journalMode === 'wal' ? new CommitWatch(path) : null,
  };
}

const STATEMENT_CACHE_SIZE = 256;

/**
 * Kysely's SQLite driver prepares every query anew; compiling the SQL costs more than running an
 * indexed lookup, and the hot paths (key lookup, page reads, import batches) repeat a handful of
 * statements. A prepared statement is reusable as long as no two uses overlap, which holds here:
 * the driver runs statements synchronously and keeps the one connection locked while it streams.
 */
function withStatementCache(sqlite: SqliteDatabase.Database): SqliteDialectConfig['database'] {
  const statements = new Map<string, SqliteDatabase.Statement>();
  return {
    close: () => sqlite.close(),
    prepare(sql: string) {
      let statement = statements.get(sql);
      if (statement === undefined) {
        statement = sqlite.prepare(sql);
        // Oldest first out: Map iteration follows insertion order.
        if (statements.size >= STATEMENT_CACHE_SIZE)
          statements.delete(statements.keys().next().value as string);
        statements.set(sql, statement);
      }
      return statement;
    },
  };
}

/** SQLite page cache while one transaction writes many rows; see `withBulkWriteSettings`. */
const BULK_WRITE_CACHE_KIB = 128 * 1024;

/** Connection settings `withBulkWriteSettings` changes, with the value each takes meanwhile. */
const BULK_WRITE_PRAGMAS = {
  cache_size: -BULK_WRITE_CACHE_KIB,
  temp_store: 2, // MEMORY
  foreign_keys: 0,
} as const;

/**
 * Runs `work` (one transaction that writes many rows) with SQLite settings for bulk writes, then
 * restores the connection's own. PostgreSQL: just `work`.
 * - A larger page cache: a bulk write touches every page of the random-UUID primary-key index
 *   (about 65 MiB per million incidents); once that index outgrows the cache, each insert reads
 *   pages back from the WAL. The cache is a bound, not an allocation, whatever the file's size.
 * - Foreign keys unenforced: the caller checks every reference itself (an import looks up each
 *   record's account first). Inside a transaction, a many-row statement that may fail halfway (an
 *   enforced foreign key can) makes SQLite journal the original of every page it changes, so that
 *   it can undo itself alone; a batch of new incidents changes about one random index page per row.
 *   Without foreign keys, `incidentRepository.upsertMany`'s INSERT OR IGNORE cannot fail halfway
 *   and runs unjournaled: a million-incident import took about a quarter less time.
 * - Temporary files in memory: what statements still journal stays off the disk.
 */
export async function withBulkWriteSettings<T>(db: Kysely<Database>, work: () => Promise<T>): Promise<T> {
  if (!(db.getExecutor().adapter instanceof SqliteAdapter)) return work();
  const previous: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(BULK_WRITE_PRAGMAS)) {
    previous[name] = Object.values((await sql.raw(`PRAGMA ${name}`).execute(db)).rows[0] as object)[0];
    await sql.raw(`PRAGMA ${name} = ${value}`).execute(db);
  }
  try {
    return await work();
  } finally {
    for (const [name, value] of Object.entries(previous))
      await sql.raw(`PRAGMA ${name} = ${Number(value)}`).execute(db);
  }
}

/** SQL texts that PostgreSQL connections prepare once and then run by name; see `preparedOnPostgres`. */
const preparedStatementNames = new Map<string, string>();

/**
 * Marks a query that runs on (nearly) every request, so that each PostgreSQL connection parses and
 * plans it once and afterwards only binds and runs it: on this 2-core machine, PostgreSQL's CPU a
 * public request went from about 110 to 40 µs. Unnamed statements, as Kysely sends them, are parsed
 * and planned anew each time. Only queries the code marks are prepared, so their number is fixed
 * by the code, never by traffic. SQLite reuses every statement anyway (`withStatementCache`).
 */
export function preparedOnPostgres<R>(query: CompiledQuery<R>): CompiledQuery<R> {
  if (!preparedStatementNames.has(query.sql)) {
    preparedStatementNames.set(query.sql, `safety_api_${preparedStatementNames.size + 1}`);
  }
  return query;
}

/** pg's client, running the SQL texts marked by `preparedOnPostgres` as named statements. */
class PreparingClient extends pg.Client {
  // pg's `query` has many overloads; this one passes every call on with the same arguments and
  // result, so its declared result (`never`) is only what satisfies all of them at once.
  override query(...args: unknown[]): never {
    const [text, values, ...rest] = args;
    const name = typeof text === 'string' ? preparedStatementNames.get(text) : undefined;
    const call = super.query as (...callArgs: unknown[]) => never;
    return name !== undefined && Array.isArray(values)
      ? call.call(this, { name, text, values }, ...rest)
      : call.apply(this, args);
  }
}

function openPostgres(databaseUrl: string, onIdleError: (error: Error) => void): Kysely<Database> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 10, Client: PreparingClient });
  // An idle connection whose server side went away (a restart, a failover, an administrator's
  // kill) is reported here; unhandled, it would end the process. The pool drops that connection
  // and opens a new one when next needed.
  pool.on('error', onIdleError);
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
}

/**
 * Opens the store that DATABASE_URL names: `sqlite:PATH` or `postgres://…`. `onIdleError` hears
 * of PostgreSQL connections lost while idle (they are replaced, nothing fails).
 */
export function openDatabase(
  databaseUrl: string,
  onIdleError: (error: Error) => void = () => {},
): DatabaseHandle {
  const store = storeOf(databaseUrl);
  const { db, commitWatch } =
    store === 'sqlite'
      ? openSqlite(databaseUrl)
      : { db: openPostgres(databaseUrl, onIdleError), commitWatch: null };
  return {
    db,
    store,
    commitWatch,
    async destroy() {
      commitWatch?.close();
      await db.destroy();
    },
  };
}
