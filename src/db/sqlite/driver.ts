import {
  type CompiledQuery,
  type DatabaseConnection,
  type Driver,
  type QueryResult,
  SqliteDialect,
  type SqliteDatabase,
  type TransactionSettings,
} from 'kysely';
import { currentOperation, requestBudget } from '../store-context.ts';
import { StoreUnavailableError } from '../store-health.ts';

/**
 * The server's SQLite driver. better-sqlite3 is synchronous, so SQLite's own busy timeout waits
 * on the event loop: while a CLI import holds the write lock, one server write froze every request
 * for seconds. Here the connection never waits inside SQLite (busy_timeout 0): a statement that
 * meets SQLITE_BUSY is tried again after a short sleep, with the event loop free, until a deadline;
 * past it the store counts as unavailable (503). Transactions begin with BEGIN IMMEDIATE, so the
 * write lock is taken (or found busy) at BEGIN, where trying again is safe, and never halfway. A
 * transaction begun as `read only` is a plain BEGIN instead: a consistent snapshot (WAL readers
 * never wait for a writer), which must not wait for, or hold off, another process's import.
 */

export interface BusyRetryOptions {
  /**
   * How long one statement or BEGIN may keep meeting a busy lock before it fails; within a request,
   * no longer than what is left of its budget (`requestBudget`).
   */
  deadlineMs: number;
  /** Hears of every failure past the deadline (the store monitor), with the operation that failed. */
  onUnavailable(error: Error, operation: string | undefined): void;
}

const FIRST_BACKOFF_MS = 2;
const MAX_BACKOFF_MS = 50;

function isBusy(error: unknown): boolean {
  const code = error instanceof Error ? (error as Error & { code?: unknown }).code : undefined;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

class ServerSqliteDriver implements Driver {
  /**
   * The connection whose transaction is open on the handle (it can hold one at a time), and when
   * that transaction ends: every other transaction and statement waits for it.
   */
  private owner: DatabaseConnection | null = null;
  private transactionEnded: Promise<void> = Promise.resolve();
  private endTransaction: () => void = () => {};

  private readonly database: SqliteDatabase;
  private readonly options: BusyRetryOptions;

  constructor(database: SqliteDatabase, options: BusyRetryOptions) {
    this.database = database;
    this.options = options;
  }

  async init(): Promise<void> {}

  // Every use gets its own connection object over the one handle: a statement outside a
  // transaction runs synchronously, so it needs no lock and never waits behind another one's
  // busy retries, only behind an open transaction (it would otherwise become part of it).
  async acquireConnection(): Promise<DatabaseConnection> {
    return new ServerSqliteConnection(this);
  }

  /**
   * A transaction that meets another process's write lock at BEGIN IMMEDIATE holds nothing while it
   * sleeps between tries: a read-only transaction (a feed page, an export) begun meanwhile goes
   * ahead at once instead of waiting behind it for up to the deadline.
   */
  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    const begin = settings.accessMode === 'read only' ? 'begin' : 'begin immediate';
    await this.withBusyRetry(async () => {
      // Re-checked before every try: another transaction may have begun while this one slept.
      while (this.owner !== null) await this.transactionEnded;
      // The handle has no transaction open here, and nothing runs between this check and BEGIN
      // (it is synchronous): BEGIN IMMEDIATE either takes the write lock or meets SQLITE_BUSY
      // having changed nothing.
      this.run(begin, []);
      this.owner = connection;
      this.transactionEnded = new Promise((resolve) => {
        this.endTransaction = () => {
          this.owner = null;
          resolve();
        };
      });
    });
  }

  async commitTransaction(): Promise<void> {
    this.run('commit', []);
    this.endTransaction();
  }

  async rollbackTransaction(): Promise<void> {
    try {
      this.run('rollback', []);
    } finally {
      this.endTransaction();
    }
  }

  async releaseConnection(): Promise<void> {}

  async destroy(): Promise<void> {
    this.database.close();
  }

  async execute<R>(connection: ServerSqliteConnection, query: CompiledQuery): Promise<QueryResult<R>> {
    if (this.owner === connection) return this.run<R>(query.sql, query.parameters);
    return this.withBusyRetry(async () => {
      // Re-checked before every try: a transaction may have begun while this one slept.
      while (this.owner !== null) await this.transactionEnded;
      return this.run<R>(query.sql, query.parameters);
    });
  }

  private run<R>(sql: string, parameters: ReadonlyArray<unknown>): QueryResult<R> {
    const statement = this.database.prepare(sql);
    if (statement.reader) return { rows: statement.all(parameters) as R[] };
    const { changes, lastInsertRowid } = statement.run(parameters);
    return { numAffectedRows: BigInt(changes), insertId: BigInt(lastInsertRowid), rows: [] };
  }

  private async withBusyRetry<T>(attempt: () => T | Promise<T>): Promise<T> {
    const started = Date.now();
    const budget = requestBudget();
    // Never longer than the per-call deadline, and within a request no longer than what is left.
    const deadline = started + Math.min(budget?.leftMs ?? Number.POSITIVE_INFINITY, this.options.deadlineMs);
    let backoff = FIRST_BACKOFF_MS;
    for (;;) {
      try {
        return await attempt();
      } catch (error) {
        if (!isBusy(error)) throw error;
        const left = deadline - Date.now();
        if (left <= 0) {
          const unavailable = new StoreUnavailableError(
            `SQLite database stayed locked by another writer for ${Date.now() - started} ms`,
            { cause: error },
          );
          this.options.onUnavailable(unavailable, currentOperation());
          throw unavailable;
        }
        // Only the waits count against a request's budget: each try itself is immediate.
        const slept = Date.now();
        await sleep(Math.min(backoff, left));
        budget?.spend(Date.now() - slept);
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
      }
    }
  }
}

class ServerSqliteConnection implements DatabaseConnection {
  private readonly driver: ServerSqliteDriver;

  constructor(driver: ServerSqliteDriver) {
    this.driver = driver;
  }

  executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    return this.driver.execute<R>(this, compiledQuery);
  }

  // Rows are read in one go rather than through a live iterator: an open iterator would keep a
  // cached prepared statement busy while other requests may run the same statement.
  async *streamQuery<R>(compiledQuery: CompiledQuery): AsyncIterableIterator<QueryResult<R>> {
    const { rows } = await this.executeQuery<R>(compiledQuery);
    for (const row of rows) yield { rows: [row] };
  }
}

/** Kysely's SQLite dialect with the server's driver in place of its own. */
export class ServerSqliteDialect extends SqliteDialect {
  private readonly sqlite: SqliteDatabase;
  private readonly busy: BusyRetryOptions;

  constructor(sqlite: SqliteDatabase, busy: BusyRetryOptions) {
    super({ database: sqlite });
    this.sqlite = sqlite;
    this.busy = busy;
  }

  override createDriver(): Driver {
    return new ServerSqliteDriver(this.sqlite, this.busy);
  }
}
