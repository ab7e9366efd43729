import pg from 'pg';
import type { CommitHandlers, CommitSignal } from '../store.ts';

/**
 * PostgreSQL's commit signal (`Store.commitSignal`): writers NOTIFY at their commit
 * (`PostgresStore.notifyCommit`), and a connection of its own LISTENs, reconnected when lost.
 */

/**
 * The channel of the wake-ups for the webhook deliveries of every server instance: a NOTIFY sent
 * with the writer's transaction (delivered at its commit, dropped at a rollback), so that a change
 * made by the CLI in another process reaches the receivers at once, with no polling. The payload is
 * an account id (its public data changed) or `*` (endpoints changed).
 */
export const WEBHOOK_CHANNEL = 'safety_api_webhooks';

/** Before reconnecting the LISTEN connection after it failed. */
const LISTEN_RETRY_MS = 1000;
/** How long a stop waits for the LISTEN connection to close. */
const LISTEN_END_MS = 1000;

/** A connection of its own that LISTENs for the writers' NOTIFY, reconnected when lost. */
export class Listener implements CommitSignal {
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
