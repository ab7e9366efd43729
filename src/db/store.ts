import type {
  ColumnDefinitionBuilder,
  CompiledQuery,
  Dialect,
  Kysely,
  RawBuilder,
  SelectQueryBuilder,
} from 'kysely';
import type { ChangeStamp } from './repositories/change-stamp.ts';
import type {
  AccountIncidentKey,
  BatchStatement,
  IncidentInput,
  RankedKey,
} from './repositories/incidents.ts';
import type { Database } from './schema.ts';
import type { Snapshot, SnapshotSource } from './snapshot.ts';

/**
 * The store: what differs between SQLite and PostgreSQL, behind one interface. Each store's code
 * lives in its own folder (`src/db/sqlite/`, `src/db/postgres/`); `database.ts` chooses one, once,
 * from DATABASE_URL, and everything else is handed the `Store` (`DatabaseHandle.store`) or finds it
 * behind a handle it was given (`storeFor`). Repositories keep the SQL that runs on both stores and
 * call the store's method for the part that differs; no code outside the two folders asks which
 * store it is on.
 */
export interface Store {
  /** For messages and logs only: no code decides anything by it. */
  readonly name: StoreName;

  // What was committed, and who hears of it.

  /**
   * Changes whenever data may have been committed, by anyone, without SQL (SQLite's commit watch
   * over the WAL index); `null` where every read must go to the store (PostgreSQL, in-memory SQLite).
   */
  readonly commitWatch: CommitCounter | null;
  /**
   * Whether every process sees the others' commits by itself (SQLite: the WAL index every
   * connection shares). PostgreSQL has nothing of the kind: its writers tell the servers through
   * the shared generation in Redis, when there is one.
   */
  readonly seesOtherProcessesCommits: boolean;
  /**
   * How the webhook deliveries hear that something was committed, so that an idle worker sleeps
   * instead of polling. `listenUrl`: where a session of its own may connect (PostgreSQL's LISTEN).
   */
  commitSignal(on: CommitHandlers, listenUrl: string): CommitSignal;
  /**
   * Tells the webhook deliveries of every instance, at the commit of `db`'s transaction, that
   * `payload` (an account id, or `*` for endpoints) changed. SQLite: nothing to send, every
   * instance sees the commit through its commit watch.
   */
  notifyCommit(db: Kysely<Database>, payload: string): Promise<void>;

  // Reading.

  /** Snapshots of this database, each on a connection of its own (`snapshot.ts`). */
  readonly snapshots: SnapshotSource;
  /** Rows per keyset read of a long walk (an export, an account's data): what this store reads cheapest. */
  readonly chunkRows: number;
  /**
   * Marks a query that runs on (nearly) every request: PostgreSQL connections parse and plan it
   * once and then run it by name. SQLite reuses every statement anyway: the query as it is.
   */
  prepared<R>(query: CompiledQuery<R>): CompiledQuery<R>;
  /**
   * `compile()`'s query, compiled once for this store and kept under `name`: for a statement whose
   * SQL depends only on the code, run so often that building it costs more than running it.
   */
  compiledOnce<R>(name: string, compile: () => CompiledQuery<R>): CompiledQuery<R>;
  /**
   * The rows of `query` in COPY's text format (src/db/copy-ndjson.ts turns them into JSON without
   * an object per row), read in `db`'s transaction; `null` where the store has no COPY (SQLite).
   */
  readonly copyRows: ((db: Kysely<Database>, query: CompiledQuery) => Promise<Buffer>) | null;
  /** Whether text `column` holds `part` exactly (case and all). */
  contains(column: string, part: string): RawBuilder<boolean>;
  /**
   * The database's clock, `offsetMs` (whole milliseconds) from the moment the statement runs, as
   * ISO 8601 text in UTC with milliseconds, the form the time columns hold (`database-time.ts`).
   */
  databaseTime(offsetMs: number): RawBuilder<string>;

  // Writing.

  /**
   * `query` with its rows locked until the transaction ends (`mode`). SQLite: the query as it is,
   * since its transactions take the one write lock at BEGIN.
   */
  lockRows<DB, TB extends keyof DB, O>(
    query: SelectQueryBuilder<DB, TB, O>,
    mode: RowLock,
  ): SelectQueryBuilder<DB, TB, O>;
  /**
   * Holds `name` until `db`'s transaction ends, without locking a row: two transactions that take
   * the same name run one after the other. SQLite: nothing to take, BEGIN IMMEDIATE holds the one
   * write lock already.
   */
  lockName(db: Kysely<Database>, name: string): Promise<void>;
  /** How this store writes many incidents at once (`incidentRepository`'s bulk writes). */
  readonly incidents: IncidentBulk;
  /**
   * Runs `work` (one transaction that writes many rows) with the settings this store wants for a
   * bulk write, then restores the connection's own.
   */
  withBulkWriteSettings<T>(db: Kysely<Database>, work: () => Promise<T>): Promise<T>;
  /** After a bulk write, brings the planner's statistics of `tables` up to date, where it keeps any. */
  refreshPlannerStatistics(db: Kysely<Database>, tables: (keyof Database)[]): Promise<void>;

  // Whole databases: migrations, copies, backups.

  /** What the migrations and their runner do differently on this store. */
  readonly migrations: MigrationDialect;
  /** The catalog and the bulk table reads and writes of `copy-store` and `restore`. */
  readonly copy: StoreCopy;
  /** SQLite's online backup into a file of its own; `null` where the store has none (PostgreSQL: pg_dump). */
  readonly backup: StoreBackup | null;

  /**
   * What the server's outage monitor runs to tell whether the store answers (`StoreMonitor`):
   * SQLite's is a write probe, since reads go on while another process holds the write lock.
   */
  probe(): Promise<void>;
  /** Closes what the store keeps open besides its handle (its commit watch, its snapshots' pool). */
  close(): Promise<void>;
}

export type StoreName = 'sqlite' | 'postgres';

/** A number that changes when anything may have been committed (`Store.commitWatch`). */
export interface CommitCounter {
  current(): Promise<number>;
}

/** What a commit signal tells (`Store.commitSignal`). */
export interface CommitHandlers {
  /** Anything may have been committed: every worker looks again, and free endpoints are claimed. */
  anything(): void;
  /** Endpoints changed (created, enabled, released): free ones are claimed. */
  endpoints(): void;
  /** An account's data changed: the workers of its endpoints look again. */
  account(accountId: string): void;
}

export interface CommitSignal {
  /** No signal of its own: each lease tick counts as a commit. */
  readonly everyTick: boolean;
  /** Starts hearing; resolves once it first tried to (it never rejects). */
  start(): Promise<void>;
  /** Stops hearing at once; resolves once its connection, if any, is closed (at most a second). */
  stop(): Promise<void>;
}

/**
 * The row locks the repositories ask for (PostgreSQL's names): `update` and `no key update` for
 * rows about to change (the second lets rows that reference them be written meanwhile), `key
 * share` to keep rows from being deleted, `update skip locked` to claim rows no one else holds.
 */
export type RowLock = 'update' | 'no key update' | 'key share' | 'update skip locked';

/** How a store writes many incidents at once. */
export interface IncidentBulk {
  /** The parameters of a batch statement for `incidents`. */
  batchParameters(incidents: (IncidentInput & ChangeStamp)[]): unknown[];
  /**
   * Runs `statement` (`BatchStatement`) for a batch of `rows` rows with `parameters`
   * (`batchParameters`); returns the rows it wrote. Its SQL depends only on the statement and the
   * batch size: it is built once and kept.
   */
  runBatch(
    db: Kysely<Database>,
    statement: BatchStatement,
    rows: number,
    parameters: unknown[],
  ): Promise<number>;
  /**
   * Adds incidents whose ids are not stored, the cheapest way the store has; rejects with
   * `IncidentExistsError` when any id is already stored.
   */
  insertNew(db: Kysely<Database>, incidents: (IncidentInput & ChangeStamp)[]): Promise<void>;
  /** Whether `insertNew` adds new incidents with less work than the upsert. */
  readonly insertsNewFaster: boolean;
  /**
   * How an import ranks a file out of order before writing it, outside the process's memory;
   * `null` where re-ranking what was written is cheaper (SQLite).
   */
  readonly keyRanking: KeyRanking | null;
  /**
   * The statement that made the paging index, when inserting or moving `rows` entries of it costs
   * more than building it again (inside a transaction only); null when the index stays.
   */
  positionIndexToRebuild(db: Kysely<Database>, rows: number): Promise<string | null>;
  /**
   * Sets the positions of the account's incidents matching `range` (SQL after `WHERE account_id
   * = …`) to `offset` plus their rank by (created_at, id).
   */
  rerank(db: Kysely<Database>, accountId: string, offset: number, range: RawBuilder<unknown>): Promise<void>;
}

/** An import's incident keys ranked by the store (`IncidentBulk.keyRanking`). */
export interface KeyRanking {
  /** Takes the file's keys, in file order; returns how many. */
  rank(db: Kysely<Database>, keys: AsyncIterable<AccountIncidentKey[]>): Promise<number>;
  /** The next `count` ranked keys, in file order. */
  next(db: Kysely<Database>, count: number): Promise<RankedKey[]>;
  /** Drops what `rank` made. */
  drop(db: Kysely<Database>): Promise<void>;
}

/** What the migrations and their runner do differently on a store. */
export interface MigrationDialect {
  /** A generated integer primary key: the store hands out the values. */
  generatedKey(column: ColumnDefinitionBuilder): ColumnDefinitionBuilder;
  /** Whether `table` exists. */
  tableExists(db: Kysely<Database>, table: string): Promise<boolean>;
  /**
   * Runs `work` on `connection` (one connection) holding the migration lock, so that processes
   * starting at once migrate one after the other; `onWait` is told once if another holds it.
   */
  withMigrationLock<T>(
    connection: Kysely<Database>,
    onWait: (() => void) | undefined,
    work: () => Promise<T>,
  ): Promise<T>;
}

/** How a column's values are compared between the stores: every column is one or the other. */
export type ColumnKind = 'integer' | 'text';

export interface TableColumn {
  name: string;
  kind: ColumnKind;
}

/** A value as both stores hold it: text, a whole number, or null. */
export type RowValue = string | number | null;
/** A row as a list of values, in the order of the columns it was read with. */
export type Row = RowValue[];

/** Where a table's next page begins: after this rowid (SQLite) or this primary key (PostgreSQL). */
export type PageCursor = number | RowValue[];

export interface Page {
  rows: Row[];
  /** Null once the table is read to its end. */
  next: PageCursor | null;
}

/** The statements that put back what `setAsideStructures` took away, in order. */
export interface SetAside {
  restore: string[];
}

/** A store's catalog and bulk table reads and writes (src/db/repositories/store-copy.ts). */
export interface StoreCopy {
  /** What tells two databases apart: the same for every URL that reaches one. */
  identity(db: Kysely<Database>): Promise<string>;
  tables(db: Kysely<Database>): Promise<string[]>;
  /** Each column's name and declared type. */
  columnTypes(db: Kysely<Database>, table: string): Promise<{ name: string; type: string }[]>;
  foreignKeys(db: Kysely<Database>, tables: string[]): Promise<{ table: string; references: string }[]>;
  readPage(
    db: Kysely<Database>,
    table: string,
    columns: TableColumn[],
    primaryKey: string[],
    after: PageCursor | null,
    limit: number,
  ): Promise<Page>;
  primaryKey(db: Kysely<Database>, table: string): Promise<string[]>;
  insertRows(db: Kysely<Database>, table: string, columns: TableColumn[], rows: Row[]): Promise<void>;
  generatedColumns(db: Kysely<Database>): Promise<{ table: string; column: string }[]>;
  generatedHigh(db: Kysely<Database>, table: string, column: string): Promise<number>;
  raiseGenerated(db: Kysely<Database>, table: string, column: string, value: number): Promise<void>;
  setAsideStructures(db: Kysely<Database>, tables: string[]): Promise<SetAside>;
  foreignKeyViolations(db: Kysely<Database>): Promise<number>;
  emptyTables(db: Kysely<Database>, tables: string[]): Promise<void>;
}

/** SQLite's online backup (`safety-api backup`). */
export interface StoreBackup {
  /** The database file; `null` for an in-memory database. */
  readonly path: string | null;
  /** Writes the whole database as of one moment into a new file at `path`. */
  vacuumInto(db: Kysely<Database>, path: string): Promise<void>;
  /** What the store finds wrong with its file; empty when nothing. */
  integrityProblems(db: Kysely<Database>): Promise<string[]>;
  /** A snapshot of another database file of this store's kind (a backup just written), read only. */
  snapshotOfFile(path: string): Promise<Snapshot>;
}

/** Where a dialect's adapter keeps its store (`storeDialect`, `storeFor`). */
const STORE = Symbol('store');

/**
 * `dialect`, with `store` kept on its adapter: every handle made from it, and every transaction,
 * connection or plugin-wrapped handle made from those, leads back to the store (`storeFor`).
 */
export function storeDialect(dialect: Dialect, store: Store): Dialect {
  return {
    createAdapter: () => Object.assign(dialect.createAdapter(), { [STORE]: store }),
    createDriver: () => dialect.createDriver(),
    createQueryCompiler: () => dialect.createQueryCompiler(),
    createIntrospector: (db) => dialect.createIntrospector(db),
  };
}

/**
 * The store behind a handle given to a repository (the server's, a transaction, a snapshot's, a
 * migration's connection): the object to call for what differs, never a name to branch on.
 */
export function storeFor<DB>(db: Kysely<DB>): Store {
  const store = (db.getExecutor().adapter as { [STORE]?: Store })[STORE];
  if (store === undefined) throw new Error('this database handle was not opened through src/db/database.ts');
  return store;
}

/** The queries a store compiled once (`Store.compiledOnce`), by name: the same for both stores. */
export class CompiledOnce {
  private readonly queries = new Map<string, CompiledQuery<unknown>>();

  get<R>(name: string, compile: () => CompiledQuery<R>): CompiledQuery<R> {
    let query = this.queries.get(name) as CompiledQuery<R> | undefined;
    if (query === undefined) {
      query = compile();
      this.queries.set(name, query);
    }
    return query;
  }
}
