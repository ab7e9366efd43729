import type { Kysely } from 'kysely';
import type { Database } from '../schema.ts';
import { storeFor } from '../store.ts';

/**
 * Wake-ups for the webhook deliveries of every server instance, sent with the writer's transaction
 * (heard at its commit, dropped at a rollback), so that a change made by the CLI in another process
 * reaches the receivers at once, with no polling. The payload is an account id (its public data
 * changed) or `*` (endpoints changed). How the store sends them, or needs not (SQLite: every
 * instance sees every commit through its commit watch), is the store's (`Store.notifyCommit`).
 */
export async function notifyWebhooks(db: Kysely<Database>, payload: string): Promise<void> {
  await storeFor(db).notifyCommit(db, payload);
}
