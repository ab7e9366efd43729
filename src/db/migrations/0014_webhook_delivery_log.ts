import { type Kysely, sql } from 'kysely';

// Nullable columns and one with a default, a column filled in that the previous release never
// reads, and an index in place of one with the same leading columns: the previous release runs on
// it as before. Its attempts carry no request or response, and it trims each endpoint's log to its
// own 100 attempts when it writes one (docs/webhooks.md, "Delivery log").
export const additive = true;

/**
 * The delivery log keeps what was sent and what came back (issue 41 item 3): on `webhook_attempts`,
 *
 * - `request_headers` (JSON object) and `request_body`: the request as sent, the signature included
 *   (never a secret); `webhooks redeliver` sends the body again;
 * - `response_headers` (JSON object) and `response_body` (its first 4 KiB, as text): null when no
 *   answer came;
 * - `outcome`: `success`, `http_error`, `gone`, `timeout`, `network_error` or `refused`, as the
 *   metrics count attempts; filled in here for the attempts already logged, from their status and
 *   error;
 * - `size`: the bytes the attempt holds in the log, which bounds each endpoint's log in bytes.
 *
 * The log is trimmed per endpoint by count, bytes and age at each write, reading the endpoint's
 * entries newest first: the index on (endpoint_id, id) becomes one on (endpoint_id, id, at, size),
 * which answers that read alone, without the rows' bodies.
 *
 * Self-contained on purpose: the adapter may change, what this migration did may not.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  // One column per statement: SQLite adds one at a time.
  for (const column of ['request_headers', 'request_body', 'response_headers', 'response_body', 'outcome'])
    await db.schema.alterTable('webhook_attempts').addColumn(column, 'text').execute();
  await db.schema
    .alterTable('webhook_attempts')
    .addColumn('size', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await sql`update webhook_attempts set outcome = case
      when status >= 200 and status < 300 then 'success'
      when status = 410 then 'gone'
      when status is not null then 'http_error'
      when error like 'refused%' then 'refused'
      when error like 'no answer within%' or error like 'could not connect%' then 'timeout'
      else 'network_error'
    end`.execute(db);
  await db.schema
    .createIndex('webhook_attempts_log')
    .on('webhook_attempts')
    .columns(['endpoint_id', 'id', 'at', 'size'])
    .execute();
  await db.schema.dropIndex('webhook_attempts_endpoint').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('webhook_attempts_endpoint')
    .on('webhook_attempts')
    .columns(['endpoint_id', 'id'])
    .execute();
  await db.schema.dropIndex('webhook_attempts_log').execute();
  for (const column of [
    'size',
    'outcome',
    'response_body',
    'response_headers',
    'request_body',
    'request_headers',
  ])
    await db.schema.alterTable('webhook_attempts').dropColumn(column).execute();
}
