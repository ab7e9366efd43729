import type { Kysely } from 'kysely';
import { cacheBudgets, DEFAULT_CACHE_MAX_MB } from '../config.ts';
import { PostgresStore } from './postgres/store.ts';
import type { Database } from './schema.ts';
import type { SnapshotSource } from './snapshot.ts';
import { type SqliteCaches, SqliteStore } from './sqlite/store.ts';
import type { CommitCounter, Store, StoreName } from './store.ts';
import { type MonitorLogger, STORE_DEADLINE_MS, StoreMonitor } from './store-health.ts';

/**
 * Where the store is chosen: the one place that reads which store DATABASE_URL names and opens it
 * (`src/db/sqlite/` or `src/db/postgres/`), for the server (`openServerDatabase`, from the
 * composition root, src/runtime.ts) or a command (`openDatabase`, src/cli/context.ts). Everything
 * else is handed the `Store` it opened (`DatabaseHandle.store`), or finds it behind the handle
 * (`storeFor`), and never asks which one it is.
 */

export type { StoreName };
export { STORE_DEADLINE_MS };

export interface DatabaseHandle {
  db: Kysely<Database>;
  /** What differs between the stores, for this database (`store.ts`). */
  store: Store;
  /** The store's commit watch (`Store.commitWatch`). */
  commitWatch: CommitCounter | null;
  /** The store's snapshots (`Store.snapshots`). */
  snapshots: SnapshotSource;
  /** The server's outage monitor (`openServerDatabase`); `null` for the CLI's handle. */
  monitor: StoreMonitor | null;
  destroy(): Promise<void>;
}

const SQLITE_PREFIX = 'sqlite:';

/**
 * The file a SQLite URL (`sqlite:PATH`) names, `:memory:` for an in-memory database; `null` for a
 * database served by a server of its own (PostgreSQL, `postgres://…`).
 */
export function databaseFile(databaseUrl: string): string | null {
  return databaseUrl.startsWith(SQLITE_PREFIX) ? databaseUrl.slice(SQLITE_PREFIX.length) : null;
}

/** Whether the database lives only in the handle that opens it (SQLite's `:memory:`): nothing else can reach it. */
export function isInMemory(databaseUrl: string): boolean {
  return databaseFile(databaseUrl) === ':memory:';
}

/** `sqlite:PATH` or `postgres://…`, as DATABASE_URL takes them. */
export function isDatabaseUrl(url: string): boolean {
  return (
    (url.startsWith(SQLITE_PREFIX) && url.length > SQLITE_PREFIX.length) || /^postgres(ql)?:\/\/./.test(url)
  );
}

/** A database URL as it may be shown: without its password. */
export function shownDatabaseUrl(url: string): string {
  if (databaseFile(url) !== null) return url;
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'postgres://…';
  }
}

/**
 * Whether the store at `databaseUrl` lets every process see the others' commits by itself
 * (`Store.seesOtherProcessesCommits`), told without opening it.
 */
export function seesOtherProcessesCommits(databaseUrl: string): boolean {
  return databaseFile(databaseUrl) !== null;
}

function handleOf(store: SqliteStore | PostgresStore, monitor: StoreMonitor | null): DatabaseHandle {
  return {
    db: store.db,
    store,
    commitWatch: store.commitWatch,
    snapshots: store.snapshots,
    monitor,
    async destroy() {
      monitor?.close();
      await store.db.destroy();
      // After the database itself: a process that read only through snapshots never opened
      // Kysely's own pool, whose end is then a no-op, and must not wait for its snapshot
      // connections to time out.
      await store.close();
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
  const file = databaseFile(databaseUrl);
  const store =
    file === null
      ? new PostgresStore(databaseUrl, onIdleError, null)
      : new SqliteStore(file, null, cacheBudgets(DEFAULT_CACHE_MAX_MB));
  return handleOf(store, null);
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
  let store: SqliteStore | PostgresStore | null = null;
  const monitor = new StoreMonitor(async () => {
    if (store !== null) await store.probe();
  }, options.logger);
  const file = databaseFile(databaseUrl);
  store =
    file === null
      ? new PostgresStore(databaseUrl, options.onIdleError ?? (() => {}), monitor)
      : new SqliteStore(
          file,
          {
            deadlineMs: options.sqliteDeadlineMs ?? STORE_DEADLINE_MS,
            onUnavailable: (error, operation) => monitor.report(error, operation),
          },
          options.caches ?? cacheBudgets(DEFAULT_CACHE_MAX_MB),
        );
  return handleOf(store, monitor);
}
