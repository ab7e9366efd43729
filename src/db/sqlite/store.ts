import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import {
  CompiledQuery,
  type DatabaseConnection,
  type Driver,
  Kysely,
  type RawBuilder,
  type SelectQueryBuilder,
  SqliteDialect,
  type SqliteDialectConfig,
  SqliteDriver,
  sql,
} from 'kysely';
import type { CacheBudgets } from '../../config.ts';
import type { Database } from '../schema.ts';
import type { SnapshotSource } from '../snapshot.ts';
import {
  type CommitHandlers,
  CompiledOnce,
  type CommitSignal,
  type Store,
  type StoreBackup,
  type StoreCopy,
  storeDialect,
} from '../store.ts';
import { EVERY_TICK, Watcher } from './commit-signal.ts';
import { CommitWatch } from './commit-watch.ts';
import { type BusyRetryOptions, ServerSqliteDialect } from './driver.ts';
import { SqliteIncidentBulk } from './incidents.ts';
import { sqliteMigrations } from './migrations.ts';
import { sharedSnapshots, sqliteSnapshots } from './snapshots.ts';
import { withStatementCache } from './statement-cache.ts';
import { sqliteBackup, sqliteCopy } from './store-copy.ts';

/** The caches of a SQLite handle: its pages and prepared statements (`cacheBudgets`). */
export type SqliteCaches = Pick<CacheBudgets, 'sqlitePages' | 'sqliteStatements'>;

/**
 * Rows per keyset read. A read's rows stay alive until they are rendered, so every young-generation
 * collection meanwhile copies them, and the more survives collections, the further V8 grows the
 * heap; the chunk size sets how far: exporting a million incidents grew the server by 150 MB with
 * 2,000 rows a read (about 120 MB even with `lines` as it is) and by 51–53 MB with 300. 600 rows
 * grew it by 53–56 MB and saved no CPU that side-by-side runs could tell from noise
 * (docs/performance.md).
 */
const CHUNK_ROWS = 300;

/** SQLite page cache while one transaction writes many rows; see `withBulkWriteSettings`. */
const BULK_WRITE_CACHE_KIB = 16 * 1024;

/** Connection settings `withBulkWriteSettings` changes, with the value each takes meanwhile. */
const BULK_WRITE_PRAGMAS = {
  cache_size: -BULK_WRITE_CACHE_KIB,
  temp_store: 1, // FILE
  foreign_keys: 0,
} as const;

/**
 * SQLite (`sqlite:PATH`): one file in WAL mode, one connection per process (better-sqlite3), a
 * read-only connection per snapshot, and the WAL index as the commit watch.
 */
export class SqliteStore implements Store {
  readonly name = 'sqlite';
  /** The handle on the store's one connection. */
  readonly db: Kysely<Database>;
  /** In WAL mode; `null` in memory, which has no WAL and no other connection. */
  readonly commitWatch: CommitWatch | null;
  readonly seesOtherProcessesCommits = true;
  readonly snapshots: SnapshotSource;
  readonly chunkRows = CHUNK_ROWS;
  /** SQLite has no COPY. */
  readonly copyRows = null;
  readonly incidents = new SqliteIncidentBulk();
  readonly migrations = sqliteMigrations;
  readonly copy: StoreCopy;
  readonly backup: StoreBackup;
  private readonly compiled = new CompiledOnce();

  /**
   * Opens `path` (or `:memory:`). `serverBusy`: the server's retries of a busy lock with the event
   * loop free (`driver.ts`); `null` for the command line, whose writers queue inside SQLite.
   */
  constructor(path: string, serverBusy: BusyRetryOptions | null, caches: SqliteCaches) {
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    // Opening may wait for another process's lock (better-sqlite3 waits 5 s): nothing is served yet.
    const sqlite = new SqliteDatabase(path);
    // WAL lets the CLI write while the server reads.
    const journalMode = sqlite.pragma('journal_mode = WAL', { simple: true });
    sqlite.pragma('synchronous = NORMAL');
    // The CLI's writers queue inside SQLite (blocking is fine there); the server's never wait on
    // the event loop: its driver retries SQLITE_BUSY asynchronously (`driver.ts`).
    sqlite.pragma(serverBusy === null ? 'busy_timeout = 5000' : 'busy_timeout = 0');
    sqlite.pragma('foreign_keys = ON');
    // A bound, not an allocation: pages beyond it are read again from the operating system's file
    // cache. A bulk write sets its own for its transaction (`withBulkWriteSettings`).
    sqlite.pragma(`cache_size = ${-Math.max(Math.floor(caches.sqlitePages / 1024), 1)}`);
    const database = withStatementCache(sqlite, caches.sqliteStatements);
    this.db = new Kysely<Database>({
      dialect: storeDialect(
        serverBusy === null
          ? new ImmediateSqliteDialect({ database })
          : new ServerSqliteDialect(database, serverBusy),
        this,
      ),
    });
    this.snapshots = path === ':memory:' ? sharedSnapshots(this.db) : sqliteSnapshots(path, this);
    // An in-memory database answers `memory`: it has no WAL and no other connection.
    this.commitWatch = journalMode === 'wal' ? new CommitWatch(path) : null;
    this.copy = sqliteCopy(path);
    this.backup = sqliteBackup(path, this);
  }

  /** The commit watch, looked at every 100 ms; in memory, every lease tick counts as a commit. */
  commitSignal(on: CommitHandlers): CommitSignal {
    return this.commitWatch === null ? EVERY_TICK : new Watcher(this.commitWatch, on);
  }

  async notifyCommit(): Promise<void> {}

  /** Every statement is prepared once and reused anyway (`withStatementCache`). */
  prepared<R>(query: CompiledQuery<R>): CompiledQuery<R> {
    return query;
  }

  compiledOnce<R>(name: string, compile: () => CompiledQuery<R>): CompiledQuery<R> {
    return this.compiled.get(name, compile);
  }

  /** The transaction's BEGIN IMMEDIATE holds the one write lock already. */
  contains(column: string, part: string): RawBuilder<boolean> {
    return sql<boolean>`instr(${sql.ref(column)}, ${part}) > 0`;
  }

  /** SQLite reads 'now' once per statement. */
  databaseTime(offsetMs: number): RawBuilder<string> {
    return sql<string>`strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ${`${offsetMs < 0 ? '-' : '+'}${Math.abs(offsetMs) / 1000} seconds`})`;
  }

  lockRows<DB, TB extends keyof DB, O>(query: SelectQueryBuilder<DB, TB, O>): SelectQueryBuilder<DB, TB, O> {
    return query;
  }

  async lockName(): Promise<void> {}

  /**
   * Runs `work` with SQLite settings for bulk writes, then restores the connection's own.
   * - A page cache of its own size: a bulk write touches every page of the random-UUID primary-key
   *   index (about 65 MiB per million incidents); once that index outgrows the cache, each insert
   *   reads pages back from the WAL (in the operating system's file cache, not this process). The
   *   cache fills to its bound whatever the file's size, so its bound is what an import's peak memory
   *   can spare: 128 MiB, the bound before, put about 100 MB more on it.
   * - Foreign keys unenforced: the caller checks every reference itself (an import looks up each
   *   record's account first). Inside a transaction, a many-row statement that may fail halfway (an
   *   enforced foreign key can) makes SQLite journal the original of every page it changes, so that
   *   it can undo itself alone; a batch of new incidents changes about one random index page per row.
   *   Without foreign keys, `incidentRepository.upsertMany`'s INSERT OR IGNORE cannot fail halfway
   *   and runs unjournaled: a million-incident import took about a quarter less time.
   * - Temporary files on disk, as by default: the sorts that rank an account's incidents
   *   (`incidentRepository.rerank`) and the journal of a statement that changes many rows grow with
   *   the file. In memory (`temp_store = MEMORY`, the setting before) a million incidents imported
   *   newest first peaked at 915 MB; in files, they are in the operating system's cache.
   */
  async withBulkWriteSettings<T>(db: Kysely<Database>, work: () => Promise<T>): Promise<T> {
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

  /** SQLite plans from its indexes alone. */
  async refreshPlannerStatistics(): Promise<void> {}

  /** The write probe of the server's outage monitor: reads go on while another process holds the write lock. */
  async probe(): Promise<void> {
    await this.db.transaction().execute(async () => {});
  }

  async close(): Promise<void> {
    this.commitWatch?.close();
    await this.snapshots.close();
  }
}

/**
 * The command line's SQLite dialect: Kysely's, except that a transaction begins with BEGIN
 * IMMEDIATE, as the server's do. A plain BEGIN reads first and asks for the write lock at its first
 * write; if another process (the server recording keys' last use) committed in between, SQLite
 * cannot upgrade that transaction and fails it at once, busy timeout or not: an import of a
 * million incidents failed that way. IMMEDIATE takes the lock at BEGIN, waiting up to the busy
 * timeout, so a transaction that began never meets that failure.
 */
class ImmediateSqliteDialect extends SqliteDialect {
  private readonly settings: SqliteDialectConfig;

  constructor(settings: SqliteDialectConfig) {
    super(settings);
    this.settings = settings;
  }

  override createDriver(): Driver {
    return new (class extends SqliteDriver {
      override async beginTransaction(connection: DatabaseConnection): Promise<void> {
        await connection.executeQuery(CompiledQuery.raw('begin immediate'));
      }
    })(this.settings);
  }
}
