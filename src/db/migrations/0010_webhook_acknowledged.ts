import { type Kysely, sql } from 'kysely';

// A new table and a column with a default: the previous release runs on it as before.
export const additive = true;

/**
 * What a webhook receiver was sent (issue 36 item 1; docs/webhooks.md, "Events"). A change is
 * `updated` only if the endpoint was sent the record since it last entered the view, which the
 * position alone cannot tell once deliveries lag behind:
 *
 * - `known_through` on `webhook_endpoints`: every record whose `created_seq` is at or before it is
 *   known to the receiver. Existing endpoints start at their position, which is what the rule before
 *   this migration assumed of them.
 * - `webhook_acknowledged`: the records an endpoint acknowledged (or whose event its filter left
 *   out) that entered the view after its `known_through`, with the `created_seq` they had then.
 *   Deleted with their endpoint.
 *
 * Additive, and self-contained on purpose: the adapter may change, what this migration did may not.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('webhook_endpoints')
    .addColumn('known_through', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await sql`update webhook_endpoints set known_through = position`.execute(db);

  await db.schema
    .createTable('webhook_acknowledged')
    .addColumn('endpoint_id', 'text', (c) =>
      c.notNull().references('webhook_endpoints.id').onDelete('cascade'),
    )
    .addColumn('record_type', 'text', (c) => c.notNull())
    .addColumn('record_id', 'text', (c) => c.notNull())
    .addColumn('created_seq', 'integer', (c) => c.notNull())
    // The id before the type: a batch's records are looked up by their ids.
    .addPrimaryKeyConstraint('webhook_acknowledged_pk', ['endpoint_id', 'record_id', 'record_type'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('webhook_acknowledged').execute();
  await db.schema.alterTable('webhook_endpoints').dropColumn('known_through').execute();
}
