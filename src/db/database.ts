import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import SqliteDatabase from 'better-sqlite3';
import {
  CompiledQuery,
  type DatabaseConnection,
  type Driver,
  Kysely,
  PostgresDialect,
  SqliteAdapter,
  SqliteDialect,
  type SqliteDialectConfig,
  SqliteDriver,
  sql,
} from 'kysely';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { type CacheBudgets, cacheBudgets, DEFAULT_CACHE_MAX_MB } from '../config.ts';
import { CommitWatch } from './commit-watch.ts';
import { withStatementCache } from './statement-cache.ts';
import type { Database } from './schema.ts';
import {
  copyOutOf,
  postgresSnapshots,
  sharedSnapshots,
  type SnapshotSource,
  sqliteSnapshots,
} from './snapshot.ts';
import { type BusyRetryOptions, ServerSqliteDialect } from './sqlite-driver.ts';
import {
  currentOperation,
  REQUEST_STORE_BUDGET_MS,
  type RequestBudget,
  requestBudget,
} from './store-context.ts';
import {
  isStoreUnavailable,
  type MonitorLogger,
  StoreMonitor,
  StoreUnavailableError,
} from './store-health.ts';

export type Store = 'sqlite' | 'postgres';

export interface DatabaseHandle {
  db: Kysely<Database>;
  store: Store;
  /**
   * Changes whenever data may have been committed, by anyone (`commit-watch.ts`): SQLite files in
   * WAL mode only; `null` for PostgreSQL and in-memory SQLite, where every read must go to the store.
   */
  commitWatch: CommitWatch | null;
  /** Snapshots of this database, each on a connection of its own (`snapshot.ts`). */
  snapshots: SnapshotSource;
  /** The server's outage monitor (`openServerDatabase`); `null` for the CLI's handle. */
  monitor: StoreMonitor | null;
  destroy(): Promise<void>;
}

/**
 * The server's deadline for one store call: a PostgreSQL connect or wait for a pooled connection,
 * a PostgreSQL statement, a SQLite statement meeting another process's write lock.
 */
export const STORE_DEADLINE_MS = 2000;
/**
 * The client-side PostgreSQL deadline of work outside a request (webhook deliveries, flushes),
 * counted from the moment it asked the pool for the connection, so that waiting for a pooled
 * connection and then for a stuck statement add up to no more than this. A request has one budget
 * for all of its checkouts instead (`REQUEST_STORE_BUDGET_MS`, the same length). It lies after the
 * server-side statement_timeout, which ends a stuck statement cleanly and keeps the connection;
 * this one also covers a frozen server.
 */
const PG_CHECKOUT_BUDGET_MS = STORE_DEADLINE_MS + 500;
/**
 * What a statement begun within its budget is given at least: one that meets the budget's last
 * moments is not failed for want of a few milliseconds. So a request's 503 comes at most this
 * much after its budget; a statement that would begin after the budget is not sent at all.
 */
const PG_MIN_QUERY_MS = 500;
/** COMMIT, ROLLBACK (to a savepoint too) and RELEASE: what ends a transaction or a savepoint. */
const ENDS_TRANSACTION = /^\s*(commit|rollback|release)\b/i;
/** When each checked-out connection was asked for (see `PG_CHECKOUT_BUDGET_MS`). */
const checkoutStarts = new WeakMap<object, number>();
const PG_POOL_SIZE = 10;
/**
 * Connections for snapshots (exports), apart from the pool requests are served from: at most this
 * many exports run at once per instance; another waits for one as long as a request waits for a
 * connection, then gets a 503.
 */
const PG_SNAPSHOT_POOL_SIZE = 4;
/**
 * A snapshot's transaction left idle this long (its export stalled without the HTTP connection
 * closing) is ended by the server: a last guard against holding old row versions for ever.
 */
const PG_SNAPSHOT_IDLE_MS = 5 * 60_000;
/** Requests allowed to wait for a pooled connection; beyond that they fail at once (503). */
const PG_MAX_WAITING = 50;

// COUNT(*) and SUM() come back as int8; every count here fits a double exactly.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

export function storeOf(databaseUrl: string): Store {
  return databaseUrl.startsWith('sqlite:') ? 'sqlite' : 'postgres';
}

/** The store a handle (or a snapshot's, or a transaction's) reads from. */
export function storeBehind(db: Kysely<Database>): Store {
  return db.getExecutor().adapter instanceof SqliteAdapter ? 'sqlite' : 'postgres';
}

/** What opening a store gives the handle. */
type Opened = Pick<DatabaseHandle, 'db' | 'commitWatch' | 'snapshots'>;

/** The caches of a database handle: SQLite's pages and prepared statements. */
type SqliteCaches = Pick<CacheBudgets, 'sqlitePages' | 'sqliteStatements'>;

function openSqlite(databaseUrl: string, serverBusy: BusyRetryOptions | null, caches: SqliteCaches): Opened {
  const path = databaseUrl.slice('sqlite:'.length);
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  // Opening may wait for another process's lock (better-sqlite3 waits 5 s): nothing is served yet.
  const sqlite = new SqliteDatabase(path);
  // WAL lets the CLI write while the server reads.
  const journalMode = sqlite.pragma('journal_mode = WAL', { simple: true });
  sqlite.pragma('synchronous = NORMAL');
  // The CLI's writers queue inside SQLite (blocking is fine there); the server's never wait on
  // the event loop: its driver retries SQLITE_BUSY asynchronously (`sqlite-driver.ts`).
  sqlite.pragma(serverBusy === null ? 'busy_timeout = 5000' : 'busy_timeout = 0');
  sqlite.pragma('foreign_keys = ON');
  // A bound, not an allocation: pages beyond it are read again from the operating system's file
  // cache. A bulk write sets its own for its transaction (`withBulkWriteSettings`).
  sqlite.pragma(`cache_size = ${-Math.max(Math.floor(caches.sqlitePages / 1024), 1)}`);
  const database = withStatementCache(sqlite, caches.sqliteStatements);
  const db = new Kysely<Database>({
    dialect:
      serverBusy === null
        ? new ImmediateSqliteDialect({ database })
        : new ServerSqliteDialect(database, serverBusy),
  });
  return {
    db,
    snapshots: path === ':memory:' ? sharedSnapshots(db) : sqliteSnapshots(path),
    // An in-memory database answers `memory`: it has no WAL and no other connection.
    commitWatch: journalMode === 'wal' ? new CommitWatch(path) : null,
  };
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

/** SQLite page cache while one transaction writes many rows; see `withBulkWriteSettings`. */
const BULK_WRITE_CACHE_KIB = 16 * 1024;

/** Connection settings `withBulkWriteSettings` changes, with the value each takes meanwhile. */
const BULK_WRITE_PRAGMAS = {
  cache_size: -BULK_WRITE_CACHE_KIB,
  temp_store: 1, // FILE
  foreign_keys: 0,
} as const;

/**
 * Runs `work` (one transaction that writes many rows) with SQLite settings for bulk writes, then
 * restores the connection's own. PostgreSQL: just `work`.
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

/**
 * After a bulk write on PostgreSQL, refreshes the planner's statistics of `tables`. Until
 * autovacuum gets to them, a freshly loaded table has none, and PostgreSQL then plans a keyset read
 * (`position < $2 ORDER BY position DESC LIMIT 300`) as a bitmap scan of every row below and a
 * sort: 47 ms instead of 0.2 ms for a chunk of an export over 100,000 incidents. SQLite needs
 * nothing: it plans from its indexes alone.
 */
export async function refreshPlannerStatistics(
  db: Kysely<Database>,
  tables: (keyof Database)[],
): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) return;
  for (const table of tables) await sql`ANALYZE ${sql.table(table)}`.execute(db);
}

/** SQL texts that PostgreSQL connections prepare once and then run by name; see `preparedOnPostgres`. */
const preparedStatementNames = new Map<string, string>();

/**
 * Marks a query that runs on (nearly) every request, so that each PostgreSQL connection parses and
 * plans it once and afterwards only binds and runs it (the saving is measured in
 * docs/architecture.md, "What makes it fast"). Unnamed statements, as Kysely sends them, are parsed
 * and planned anew each time. Only queries the code marks are prepared, so their number is fixed
 * by the code, never by traffic. SQLite reuses every statement anyway (`withStatementCache`).
 */
export function preparedOnPostgres<R>(query: CompiledQuery<R>): CompiledQuery<R> {
  if (!preparedStatementNames.has(query.sql)) {
    preparedStatementNames.set(query.sql, `safety_api_${preparedStatementNames.size + 1}`);
  }
  return query;
}

/** SQL texts that PostgreSQL connections run as `COPY (…) TO STDOUT`; see `copiedOnPostgres`. */
const copiedStatements = new Set<string>();

/** What a query marked by `copiedOnPostgres` answers: one row, the COPY text of all its rows. */
export interface CopiedRows {
  copy: Buffer;
}

/**
 * Marks a query whose rows the caller wants in COPY's text format (src/db/copy-ndjson.ts turns
 * them into JSON without an object or a string per field): a PostgreSQL connection runs it as
 * `COPY (…) TO STDOUT`, its parameters written in as literals, in the caller's transaction, and
 * answers one row holding the whole text. For a bounded result (a page of the changes feed); an
 * export streams its copy instead (`Snapshot.copyOut`). PostgreSQL only: SQLite has no COPY.
 */
export function copiedOnPostgres(query: CompiledQuery): CompiledQuery<CopiedRows> {
  copiedStatements.add(query.sql);
  return CompiledQuery.raw(query.sql, [...query.parameters]);
}

/** SQL texts that PostgreSQL connections run as `COPY … FROM STDIN`; see `copyInOnPostgres`. */
const copyInStatements = new Set<string>();

/** What a query made by `copyInOnPostgres` answers: one row, the number of rows copied. */
export interface CopiedIn {
  copied: number;
}

/**
 * `COPY table (columns) FROM STDIN` with `data`, rows in COPY's text format (copy-text.ts), as the
 * query's one parameter: a PostgreSQL connection streams the data in, in the caller's transaction,
 * and answers one row with the count PostgreSQL reports. The cheapest way to add rows: no
 * statement to plan, no parameter or JSON to parse per row. It fails, as an INSERT would, on any
 * constraint a row breaks. PostgreSQL only: SQLite has no COPY.
 */
export function copyInOnPostgres(
  table: string,
  columns: readonly string[],
  data: string,
): CompiledQuery<CopiedIn> {
  const text = `COPY ${pg.escapeIdentifier(table)} (${columns.map((name) => pg.escapeIdentifier(name)).join(', ')}) FROM STDIN`;
  copyInStatements.add(text);
  return CompiledQuery.raw(text, [data]);
}

interface QueryDeadline {
  budgetMs: number;
  monitor: StoreMonitor;
}

/** pg's client, running the SQL texts marked by `preparedOnPostgres` as named statements. */
class PreparingClient extends pg.Client {
  /** Set by the server's subclass (`openPostgres`); the CLI's queries have no deadline. */
  protected queryDeadline: QueryDeadline | null = null;

  // pg's `query` has many overloads; this one passes every call on with the same arguments and
  // result, so its declared result (`never`) is only what satisfies all of them at once.
  override query(...args: unknown[]): never {
    const [text, values, ...rest] = args;
    const deadline = this.queryDeadline;
    const operation = currentOperation();
    const budget =
      deadline === null || typeof text !== 'string' || ENDS_TRANSACTION.test(text)
        ? undefined
        : requestBudget();
    // A request whose budget is spent gets its 503 now, not after one more statement; but a
    // transaction's end is always sent: a connection whose ROLLBACK was kept back would go back to
    // the pool inside the transaction, and the next user's statements would run in it.
    if (deadline !== null && budget !== undefined && budget.leftMs <= 0) {
      const error = budgetSpent();
      deadline.monitor.report(error, operation);
      return Promise.reject(error) as never;
    }
    const name = typeof text === 'string' ? preparedStatementNames.get(text) : undefined;
    const call = super.query as (...callArgs: unknown[]) => never;
    const result: unknown =
      typeof text === 'string' && copiedStatements.has(text) && Array.isArray(values)
        ? this.copied(text, values)
        : typeof text === 'string' && copyInStatements.has(text) && Array.isArray(values)
          ? this.copiedIn(text, values[0])
          : name !== undefined && Array.isArray(values)
            ? call.call(this, { name, text, values }, ...rest)
            : call.apply(this, args);
    if (deadline === null || !(result instanceof Promise)) return result as never;
    const left = budget?.leftMs ?? (checkoutStarts.get(this) ?? Date.now()) + deadline.budgetMs - Date.now();
    return this.withDeadline(result, Math.max(left, PG_MIN_QUERY_MS), deadline.monitor, {
      operation,
      budget,
    }) as never;
  }

  /** A query marked by `copiedOnPostgres`: its COPY text, whole, as the one row of a result. */
  private async copied(
    text: string,
    parameters: unknown[],
  ): Promise<{ rows: CopiedRows[]; command: string }> {
    const stream: Readable = super.query(copyOutOf({ sql: text, parameters }, this));
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    return { rows: [{ copy: Buffer.concat(chunks) }], command: 'COPY' };
  }

  /** A query made by `copyInOnPostgres`: its data streamed in, and the count of rows copied. */
  private async copiedIn(text: string, data: unknown): Promise<{ rows: CopiedIn[]; command: string }> {
    if (typeof data !== 'string') throw new TypeError('COPY FROM STDIN: the data must be one string');
    const stream: ReturnType<typeof copyFrom> = super.query(copyFrom(text));
    stream.end(data);
    // Settles once PostgreSQL has taken every row, or refused one (a constraint, a bad value).
    await finished(stream);
    return { rows: [{ copied: stream.rowCount }], command: 'COPY' };
  }

  /**
   * pg's own query_timeout only stops waiting: the connection stays stuck on the unanswered query
   * and goes back to the pool. Past the deadline this ends the connection, so the pool opens a new
   * one, and the caller gets a "store unavailable" error.
   */
  private withDeadline(
    pending: Promise<unknown>,
    ms: number,
    monitor: StoreMonitor,
    { operation, budget }: { operation: string | undefined; budget: RequestBudget | undefined },
  ): Promise<unknown> {
    const started = Date.now();
    return new Promise((resolve, reject) => {
      let settled = false;
      const settle = () => {
        settled = true;
        budget?.spend(Date.now() - started);
      };
      // Judged after the poll phase (`setImmediate`): an event loop kept busy past the deadline
      // runs its timers before it reads the answers that arrived meanwhile, and those are not a
      // late PostgreSQL.
      const timer = setTimeout(
        () =>
          setImmediate(() => {
            if (settled) return;
            settle();
            const error = new StoreUnavailableError(`PostgreSQL did not answer within ${ms} ms`);
            monitor.report(error, operation);
            reject(error);
            this.end().catch(() => {});
          }),
        ms,
      );
      pending.then(
        (value) => {
          clearTimeout(timer);
          if (settled) return;
          settle();
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          if (settled) return;
          settle();
          monitor.report(error, operation);
          reject(error);
        },
      );
    });
  }
}

/** The error of a request that has no budget left for the store. */
function budgetSpent(): StoreUnavailableError {
  return new StoreUnavailableError(`the request's ${REQUEST_STORE_BUDGET_MS} ms for the store ran out`);
}

/**
 * A pooled connection, if one comes within what is left of `budget` (which the wait is counted
 * against); otherwise a "store unavailable" error, and the connection, should it come later, goes
 * straight back to the pool.
 */
function checkoutWithin(pool: pg.Pool, budget: RequestBudget): Promise<pg.PoolClient> {
  const left = budget.leftMs;
  if (left <= 0) return Promise.reject(budgetSpent());
  const started = Date.now();
  return new Promise((resolve, reject) => {
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      budget.spend(Date.now() - started);
      reject(budgetSpent());
    }, left);
    pool.connect().then(
      (client) => {
        clearTimeout(timer);
        if (late) return client.release();
        budget.spend(Date.now() - started);
        resolve(client);
      },
      (error: unknown) => {
        clearTimeout(timer);
        if (late) return;
        budget.spend(Date.now() - started);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}

function openPostgres(
  databaseUrl: string,
  onIdleError: (error: Error) => void,
  monitor: StoreMonitor | null,
): Opened {
  const deadline = monitor === null ? null : { budgetMs: PG_CHECKOUT_BUDGET_MS, monitor };
  const newPool = (max: number, extra: pg.PoolConfig = {}) => {
    const pool = new pg.Pool({
      connectionString: databaseUrl,
      max,
      Client: class extends PreparingClient {
        protected override queryDeadline = deadline;
      },
      // Bounds both opening a connection and waiting for a pooled one.
      ...(monitor === null
        ? {}
        : { connectionTimeoutMillis: STORE_DEADLINE_MS, statement_timeout: STORE_DEADLINE_MS }),
      ...extra,
    });
    // An idle connection whose server side went away (a restart, a failover, an administrator's
    // kill) is reported here; unhandled, it would end the process. The pool drops that connection
    // and opens a new one when next needed.
    pool.on('error', (error) => {
      // During an outage every idle connection dies at once: the monitor's one line says it all.
      if (monitor !== null && isStoreUnavailable(error)) monitor.report(error, 'pool: idle connection');
      else onIdleError(error);
    });
    // pg-pool listens for 'error' only while a connection is idle; one that dies while checked out
    // (between two queries, or with none running) would emit it unheard and end the process. Its
    // query, if any, fails on its own, and the pool discards the connection when it comes back.
    pool.on('connect', (client) => {
      client.on('error', (error) => monitor?.report(error, 'pool: connection in use'));
    });
    return pool;
  };
  const pool = newPool(PG_POOL_SIZE);
  const snapshots = postgresSnapshots(
    newPool(PG_SNAPSHOT_POOL_SIZE, { idle_in_transaction_session_timeout: PG_SNAPSHOT_IDLE_MS }),
    { silentAfterMs: PG_CHECKOUT_BUDGET_MS, stalledAfterMs: PG_SNAPSHOT_IDLE_MS },
  );
  const bounded = {
    async connect() {
      const operation = currentOperation();
      try {
        if (monitor !== null && pool.waitingCount >= PG_MAX_WAITING) {
          throw new StoreUnavailableError('too many requests are waiting for a PostgreSQL connection');
        }
        const started = Date.now();
        // The pool's own wait (connectionTimeoutMillis) is per checkout; a request's is what is
        // left of its budget.
        const budget = monitor === null ? undefined : requestBudget();
        const client = await (budget === undefined ? pool.connect() : checkoutWithin(pool, budget));
        checkoutStarts.set(client, started);
        return client;
      } catch (error) {
        monitor?.report(error, operation);
        throw error;
      }
    },
    // Its snapshots' pool is closed by the handle (`destroy`): Kysely calls this only
    // once it has used the pool, which a process reading only through snapshots never does.
    end: () => pool.end(),
  };
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: bounded }) });
  return { db, commitWatch: null, snapshots };
}

function handleOf(
  store: Store,
  { db, commitWatch, snapshots }: Opened,
  monitor: StoreMonitor | null,
): DatabaseHandle {
  return {
    db,
    store,
    commitWatch,
    snapshots,
    monitor,
    async destroy() {
      monitor?.close();
      commitWatch?.close();
      await db.destroy();
      // After the database itself: a process that read only through snapshots never opened
      // Kysely's own pool, whose end is then a no-op, and must not wait for its snapshot
      // connections to time out.
      await snapshots.close();
    },
  };
}

/**
 * Opens the store that DATABASE_URL names: `sqlite:PATH` or `postgres://…`, for the CLI: no
 * deadlines, SQLite writers wait for each other inside SQLite. `onIdleError` hears of PostgreSQL
 * connections lost while idle (they are replaced, nothing fails).
 */
export function openDatabase(
  databaseUrl: string,
  onIdleError: (error: Error) => void = () => {},
): DatabaseHandle {
  const store = storeOf(databaseUrl);
  const opened =
    store === 'sqlite'
      ? openSqlite(databaseUrl, null, cacheBudgets(DEFAULT_CACHE_MAX_MB))
      : openPostgres(databaseUrl, onIdleError, null);
  return handleOf(store, opened, null);
}

export interface ServerDatabaseOptions {
  /** Hears the one line per outage and per recovery. */
  logger: MonitorLogger;
  onIdleError?: (error: Error) => void;
  /** CACHE_MAX_MB's shares for SQLite (`cacheBudgets`; by default its default's); PostgreSQL keeps no cache here. */
  caches?: SqliteCaches;
  /**
   * How long a SQLite statement may keep meeting another process's write lock (STORE_DEADLINE_MS
   * unless given: a test of what waits for what sets it far above the events it waits for).
   */
  sqliteDeadlineMs?: number;
}

/**
 * Opens the store for the server: every call has a deadline (`STORE_DEADLINE_MS`), SQLite never
 * waits on the event loop, a bounded queue for PostgreSQL connections, and a monitor that logs
 * when the store becomes unavailable and when it is back.
 */
export function openServerDatabase(databaseUrl: string, options: ServerDatabaseOptions): DatabaseHandle {
  const store = storeOf(databaseUrl);
  let db: Kysely<Database> | null = null;
  // A write probe for SQLite: reads go on while another process holds the write lock.
  const probe = async () => {
    if (db === null) return;
    if (store === 'sqlite') await db.transaction().execute(async () => {});
    else await sql`select 1`.execute(db);
  };
  const monitor = new StoreMonitor(probe, options.logger);
  const opened =
    store === 'sqlite'
      ? openSqlite(
          databaseUrl,
          {
            deadlineMs: options.sqliteDeadlineMs ?? STORE_DEADLINE_MS,
            onUnavailable: (error, operation) => monitor.report(error, operation),
          },
          options.caches ?? cacheBudgets(DEFAULT_CACHE_MAX_MB),
        )
      : openPostgres(databaseUrl, options.onIdleError ?? (() => {}), monitor);
  db = opened.db;
  return handleOf(store, opened, monitor);
}
