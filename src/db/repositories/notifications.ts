import { type Kysely, PostgresAdapter, sql } from 'kysely';
import type { Database } from '../schema.ts';

/**
 * Wake-ups for the webhook deliveries of every server instance on PostgreSQL: a NOTIFY on one
 * channel, sent with the writer's transaction (delivered at its commit, dropped at a rollback), so
 * that a change made by the CLI in another process reaches the receivers at once, with no polling.
 * The payload is an account id (its public data changed) or `*` (endpoints changed). SQLite needs
 * none of this: every instance sees every commit through its commit watch.
 */
export const WEBHOOK_CHANNEL = 'safety_api_webhooks';

export async function notifyWebhooks(db: Kysely<Database>, payload: string): Promise<void> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return;
  await sql`select pg_notify(${WEBHOOK_CHANNEL}, ${payload})`.execute(db);
}
