import {
  CompiledQuery,
  Kysely,
  PostgresDialect,
  type RawBuilder,
  type SelectQueryBuilder,
  sql,
} from 'kysely';
import pg from 'pg';
import type { Database } from '../schema.ts';
import type { SnapshotSource } from '../snapshot.ts';
import {
  type CommitHandlers,
  CompiledOnce,
  type CommitSignal,
  type RowLock,
  type Store,
  type StoreCopy,
  storeDialect,
} from '../store.ts';
import { currentOperation, requestBudget } from '../store-context.ts';
import {
  isStoreUnavailable,
  STORE_DEADLINE_MS,
  type StoreMonitor,
  StoreUnavailableError,
} from '../store-health.ts';
import {
  checkoutWithin,
  type CopiedIn,
  type CopiedRows,
  newStatementMarks,
  PreparingClient,
  type QueryDeadline,
  type StatementMarks,
} from './client.ts';
import { Listener, WEBHOOK_CHANNEL } from './commit-signal.ts';
import { PostgresIncidentBulk } from './incidents.ts';
import { postgresMigrations } from './migrations.ts';
import { postgresSnapshots } from './snapshots.ts';
import { postgresCopy } from './store-copy.ts';

/**
 * The client-side PostgreSQL deadline of work outside a request (webhook deliveries, flushes),
 * counted from the moment it asked the pool for the connection, so that waiting for a pooled
 * connection and then for a stuck statement add up to no more than this. A request has one budget
 * for all of its checkouts instead (`REQUEST_STORE_BUDGET_MS`, the same length). It lies after the
 * server-side statement_timeout, which ends a stuck statement cleanly and keeps the connection;
 * this one also covers a frozen server.
 */
const PG_CHECKOUT_BUDGET_MS = STORE_DEADLINE_MS + 500;
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
/**
 * Rows per keyset read, where each read is a round trip to another process and another statement
 * to plan: fewer, larger reads cost less CPU per row on both sides (docs/performance.md,
 * "PostgreSQL reads").
 */
const CHUNK_ROWS = 1000;

// COUNT(*) and SUM() come back as int8; every count here fits a double exactly.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

/**
 * PostgreSQL (`postgres://…`): a pool of connections for requests and one for snapshots, whose
 * connections run what the store's code marked (`StatementMarks`: named statements, COPY both
 * ways) and, for the server, within its deadlines; LISTEN/NOTIFY as the commit signal.
 */
export class PostgresStore implements Store {
  readonly name = 'postgres';
  /** The handle on the request pool. */
  readonly db: Kysely<Database>;
  /** No shared header to watch: every read goes to PostgreSQL (or the shared generation says). */
  readonly commitWatch = null;
  readonly seesOtherProcessesCommits = false;
  readonly snapshots: SnapshotSource;
  readonly chunkRows = CHUNK_ROWS;
  readonly incidents: PostgresIncidentBulk;
  readonly migrations = postgresMigrations;
  readonly copy: StoreCopy;
  /** PostgreSQL is backed up with pg_dump and pg_restore (docs/operations.md, "Backups"). */
  readonly backup = null;
  private readonly marks: StatementMarks = newStatementMarks();
  private readonly compiled = new CompiledOnce();

  /**
   * Opens the pools of `databaseUrl`. `monitor`: the server's outage monitor, which gives every
   * call a deadline; `null` for the command line, whose queries have none. `onIdleError` hears of
   * connections lost while idle (they are replaced, nothing fails).
   */
  constructor(databaseUrl: string, onIdleError: (error: Error) => void, monitor: StoreMonitor | null) {
    const deadline: QueryDeadline | null =
      monitor === null ? null : { budgetMs: PG_CHECKOUT_BUDGET_MS, monitor };
    const marks = this.marks;
    const newPool = (max: number, extra: pg.PoolConfig = {}) => {
      const pool = new pg.Pool({
        connectionString: databaseUrl,
        max,
        Client: class extends PreparingClient {
          protected override queryDeadline = deadline;
          protected override marks = marks;
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
    this.snapshots = postgresSnapshots(
      newPool(PG_SNAPSHOT_POOL_SIZE, { idle_in_transaction_session_timeout: PG_SNAPSHOT_IDLE_MS }),
      { silentAfterMs: PG_CHECKOUT_BUDGET_MS, stalledAfterMs: PG_SNAPSHOT_IDLE_MS },
      this,
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
          (client as unknown as PreparingClient).checkedOutAt = started;
          return client;
        } catch (error) {
          monitor?.report(error, operation);
          throw error;
        }
      },
      // Its snapshots' pool is closed by the store (`close`): Kysely calls this only once it has
      // used the pool, which a process reading only through snapshots never does.
      end: () => pool.end(),
    };
    this.db = new Kysely<Database>({ dialect: storeDialect(new PostgresDialect({ pool: bounded }), this) });
    const copied = (query: CompiledQuery) => this.copiedQuery(query);
    const copyIn = (table: string, columns: readonly string[], data: string) =>
      this.copyInQuery(table, columns, data);
    this.incidents = new PostgresIncidentBulk(copyIn);
    this.copy = postgresCopy(copied, copyIn);
  }

  /** A connection of its own LISTENs for the writers' NOTIFY (`notifyCommit`), reconnected when lost. */
  commitSignal(on: CommitHandlers, listenUrl: string): CommitSignal {
    return new Listener(listenUrl, on);
  }

  /** A NOTIFY, sent with the writer's transaction: delivered at its commit, dropped at a rollback. */
  async notifyCommit(db: Kysely<Database>, payload: string): Promise<void> {
    await sql`select pg_notify(${WEBHOOK_CHANNEL}, ${payload})`.execute(db);
  }

  /**
   * Unnamed statements, as Kysely sends them, are parsed and planned anew each time; a marked one
   * is prepared once per connection and afterwards only bound and run (the saving is measured in
   * docs/architecture.md, "What makes it fast").
   */
  prepared<R>(query: CompiledQuery<R>): CompiledQuery<R> {
    if (!this.marks.prepared.has(query.sql)) {
      this.marks.prepared.set(query.sql, `safety_api_${this.marks.prepared.size + 1}`);
    }
    return query;
  }

  compiledOnce<R>(name: string, compile: () => CompiledQuery<R>): CompiledQuery<R> {
    return this.compiled.get(name, compile);
  }

  /** In `db`'s transaction, as one `COPY (…) TO STDOUT` (`copiedQuery`), for a bounded result. */
  readonly copyRows = async (db: Kysely<Database>, query: CompiledQuery): Promise<Buffer> => {
    const { rows } = await db.executeQuery(this.copiedQuery(query));
    return rows[0]?.copy ?? Buffer.alloc(0);
  };

  /**
   * `query`, marked so that this store's connections run it as `COPY (…) TO STDOUT`, its
   * parameters written in as literals, in the caller's transaction, answering one row that holds
   * the whole text. For a bounded result (a page of the changes feed); an export streams its copy
   * instead (`Snapshot.copyOut`).
   */
  copiedQuery(query: CompiledQuery): CompiledQuery<CopiedRows> {
    this.marks.copiedOut.add(query.sql);
    return CompiledQuery.raw(query.sql, [...query.parameters]);
  }

  /**
   * `COPY table (columns) FROM STDIN` with `data`, rows in COPY's text format (copy-text.ts), as the
   * query's one parameter: this store's connections stream the data in, in the caller's
   * transaction, and answer one row with the count PostgreSQL reports. The cheapest way to add
   * rows: no statement to plan, no parameter or JSON to parse per row. It fails, as an INSERT
   * would, on any constraint a row breaks.
   */
  copyInQuery(table: string, columns: readonly string[], data: string): CompiledQuery<CopiedIn> {
    const text = `COPY ${pg.escapeIdentifier(table)} (${columns.map((name) => pg.escapeIdentifier(name)).join(', ')}) FROM STDIN`;
    this.marks.copiedIn.add(text);
    return CompiledQuery.raw(text, [data]);
  }

  contains(column: string, part: string): RawBuilder<boolean> {
    return sql<boolean>`strpos(${sql.ref(column)}, ${part}) > 0`;
  }

  /**
   * `statement_timestamp()` is the statement's start (`now()` would be its transaction's, which may
   * have begun long before).
   */
  databaseTime(offsetMs: number): RawBuilder<string> {
    return sql<string>`to_char((statement_timestamp() + make_interval(secs => ${offsetMs / 1000}::double precision)) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
  }

  lockRows<DB, TB extends keyof DB, O>(
    query: SelectQueryBuilder<DB, TB, O>,
    mode: RowLock,
  ): SelectQueryBuilder<DB, TB, O> {
    switch (mode) {
      case 'update':
        return query.forUpdate();
      case 'no key update':
        return query.forNoKeyUpdate();
      case 'key share':
        return query.forKeyShare();
      case 'update skip locked':
        return query.forUpdate().skipLocked();
    }
  }

  /** A transaction-level advisory lock of its own per name, which writers of rows do not wait for. */
  async lockName(db: Kysely<Database>, name: string): Promise<void> {
    await sql`select pg_advisory_xact_lock(hashtextextended(${name}, 0))`.execute(db);
  }

  /** PostgreSQL needs nothing of its own for a bulk write. */
  withBulkWriteSettings<T>(_db: Kysely<Database>, work: () => Promise<T>): Promise<T> {
    return work();
  }

  /**
   * Until autovacuum gets to them, a freshly loaded table has no statistics, and PostgreSQL then
   * plans a keyset read (`position < $2 ORDER BY position DESC LIMIT 300`) as a bitmap scan of
   * every row below and a sort: 47 ms instead of 0.2 ms for a chunk of an export over 100,000
   * incidents.
   */
  async refreshPlannerStatistics(db: Kysely<Database>, tables: (keyof Database)[]): Promise<void> {
    for (const table of tables) await sql`ANALYZE ${sql.table(table)}`.execute(db);
  }

  async probe(): Promise<void> {
    await sql`select 1`.execute(this.db);
  }

  /** After the handle itself: a process that read only through snapshots must not wait for them to time out. */
  async close(): Promise<void> {
    await this.snapshots.close();
  }
}
