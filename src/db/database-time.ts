import type { Kysely, RawBuilder } from 'kysely';
import type { Database } from './schema.ts';
import { storeFor } from './store.ts';

/**
 * The database's clock, `offsetMs` from the moment the statement runs, written as the stores'
 * text time columns hold time: ISO 8601 in UTC with milliseconds (`2026-11-28T21:25:00.000Z`, as
 * `Date#toISOString` writes it), so that it compares with them as text and can be stored in them.
 *
 * Webhook leases are set and compared on it (src/webhooks/lease.ts): every instance then agrees on
 * when a lease runs out, whatever its own clock says. How each store reads its clock is the
 * store's (`Store.databaseTime`).
 */
export function databaseTime(db: Kysely<Database>, offsetMs = 0): RawBuilder<string> {
  return storeFor(db).databaseTime(Math.round(offsetMs));
}
