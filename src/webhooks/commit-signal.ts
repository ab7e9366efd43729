import pg from 'pg';
import type { CommitWatch } from '../db/commit-watch.ts';
import { WEBHOOK_CHANNEL } from '../db/repositories/notifications.ts';

/**
 * How the deliveries hear that something was committed, so that an idle worker sleeps instead of
 * polling: the one place the delivery worker asks which store it is on.
 *
 * - PostgreSQL: writers NOTIFY at their commit (`notifyWebhooks`), and a connection of its own
 *   LISTENs, reconnected when lost.
 * - SQLite in WAL mode: the commit watch, one 48-byte read of the WAL index every COMMIT_WATCH_MS.
 * - SQLite in memory: no signal; every lease tick counts as a commit.
 */

/** How often SQLite's commit watch is looked at: a 48-byte read, no SQL. */
const COMMIT_WATCH_MS = 100;
/** Before reconnecting the LISTEN connection after it failed. */
const LISTEN_RETRY_MS = 1000;
/** How long a stop waits for the LISTEN connection to close. */
const LISTEN_END_MS = 1000;

export interface CommitHandlers {
  /** Anything may have been committed: every worker looks again, and free endpoints are claimed. */
  anything(): void;
  /** Endpoints changed (created, enabled, released): free ones are claimed. */
  endpoints(): void;
  /** An account's data changed: the workers of its endpoints look again. */
  account(accountId: string): void;
}

export interface CommitSignalOptions {
  store: 'sqlite' | 'postgres';
  /** SQLite in WAL mode: the commit watch; null otherwise. */
  commitWatch: CommitWatch | null;
  /** PostgreSQL: where the LISTEN connection goes. */
  databaseUrl: string;
}

export interface CommitSignal {
  /** No signal of its own: each lease tick counts as a commit. */
  readonly everyTick: boolean;
  /** Starts hearing; on PostgreSQL, resolves once the first LISTEN was tried (it never rejects). */
  start(): Promise<void>;
  /** Stops hearing at once; resolves once its connection, if any, is closed (at most LISTEN_END_MS). */
  stop(): Promise<void>;
}

/** The signal of the store `options` name, telling `on`. */
export function commitSignal(options: CommitSignalOptions, on: CommitHandlers): CommitSignal {
  if (options.store === 'postgres') return new Listener(options.databaseUrl, on);
  if (options.commitWatch !== null) return new Watcher(options.commitWatch, on);
  return { everyTick: true, start: () => Promise.resolve(), stop: () => Promise.resolve() };
}

/** SQLite in WAL mode: the commit watch, looked at every COMMIT_WATCH_MS. */
class Watcher implements CommitSignal {
  readonly everyTick = false;
  private timer: NodeJS.Timeout | null = null;
  private last = -1;
  private readonly watch: CommitWatch;
  private readonly on: CommitHandlers;

  constructor(watch: CommitWatch, on: CommitHandlers) {
    this.watch = watch;
    this.on = on;
  }

  start(): Promise<void> {
    this.timer = setInterval(() => {
      // current() never rejects, and nothing in the callback throws.
      void this.watch.current().then((generation) => {
        if (generation === this.last) return;
        this.last = generation;
        this.on.anything();
      });
    }, COMMIT_WATCH_MS);
    return Promise.resolve();
  }

  stop(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    return Promise.resolve();
  }
}

/** PostgreSQL: a connection of its own that LISTENs for the writers' NOTIFY, reconnected when lost. */
class Listener implements CommitSignal {
  readonly everyTick = false;
  private client: pg.Client | null = null;
  private stopped = false;
  private readonly databaseUrl: string;
  private readonly on: CommitHandlers;

  constructor(databaseUrl: string, on: CommitHandlers) {
    this.databaseUrl = databaseUrl;
    this.on = on;
  }

  start(): Promise<void> {
    return this.listen();
  }

  /** Connects and LISTENs; never rejects: a failure schedules the next try. */
  private async listen(): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client({ connectionString: this.databaseUrl, keepAlive: true });
    const retry = () => {
      if (this.client !== client || this.stopped) return;
      this.client = null;
      client.end().catch(() => {});
      // listen() never rejects: a failure schedules the next try.
      setTimeout(() => void this.listen(), LISTEN_RETRY_MS).unref();
    };
    client.on('error', retry);
    client.on('end', retry);
    client.on('notification', (message) => {
      // The payload: an account whose data changed, or `*` (endpoints changed).
      const payload = message.payload ?? '*';
      if (payload === '*') this.on.endpoints();
      else this.on.account(payload);
    });
    this.client = client;
    try {
      await client.connect();
      await client.query(`LISTEN ${WEBHOOK_CHANNEL}`);
      // Anything committed while not listening is looked for now.
      this.on.anything();
    } catch {
      retry();
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const client = this.client;
    this.client = null;
    // A frozen server never answers the goodbye: the connection is not waited for past a second.
    if (client !== null) await Promise.race([client.end().catch(() => {}), sleep(LISTEN_END_MS)]);
  }
}

const sleep = (ms: number) =>
  new Promise<void>((resolve) => {
    setTimeout(resolve, ms).unref();
  });
