import { type Kysely, PostgresAdapter, type RawBuilder, sql } from 'kysely';
import type { Database } from './schema.ts';

/**
 * The database's clock, `offsetMs` from the moment the statement runs, written as the stores'
 * text time columns hold time: ISO 8601 in UTC with milliseconds (`2026-11-28T21:25:00.000Z`, as
 * `Date#toISOString` writes it), so that it compares with them as text and can be stored in them.
 *
 * Webhook leases are set and compared on it (src/webhooks/lease.ts): every instance then agrees on
 * when a lease runs out, whatever its own clock says. The one place the stores differ about time:
 * SQLite reads 'now' once per statement; PostgreSQL's `statement_timestamp()` is the statement's
 * start (`now()` would be its transaction's, which may have begun long before).
 */
export function databaseTime(db: Kysely<Database>, offsetMs = 0): RawBuilder<string> {
  const ms = Math.round(offsetMs);
  if (db.getExecutor().adapter instanceof PostgresAdapter)
    return sql<string>`to_char((statement_timestamp() + make_interval(secs => ${ms / 1000}::double precision)) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
  return sql<string>`strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ${`${ms < 0 ? '-' : '+'}${Math.abs(ms) / 1000} seconds`})`;
}
