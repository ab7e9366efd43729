import { type Kysely, sql } from 'kysely';

// A nullable column, a rewrite of `events` that keeps its meaning, and an index: the previous
// release runs on it as before, except that a duplicate it tries to create fails on the index,
// with nothing written (the rule this release enforces, docs/webhooks.md, "Bounds").
export const additive = true;

/**
 * One webhook endpoint per URL and event filter in an account (issue 41, "bounds per tenant"), held
 * by the store itself: a unique index on (account_id, url, events), so that two creations racing
 * each other cannot both pass.
 *
 * - `events` becomes canonical (each pattern once, none a wildcard of the same filter covers, sorted),
 *   so that two spellings of one filter are one value. Order never mattered to delivery.
 * - Endpoints that already repeat an older one's URL and filter are kept, delivering as before:
 *   `duplicate_of` names the oldest of their group, and the index leaves them out (`where
 *   duplicate_of is null`). Editing their URL or events clears it.
 *
 * Self-contained on purpose: the adapter may change, what this migration did may not.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_endpoints').addColumn('duplicate_of', 'text').execute();

  const { rows } = await sql<{ id: string; account_id: string; url: string; events: string }>`
    select id, account_id, url, events from webhook_endpoints order by created_at, id`.execute(db);
  const oldest = new Map<string, string>();
  for (const row of rows) {
    const events = canonical(row.events);
    const target = JSON.stringify([row.account_id, row.url, events]);
    const first = oldest.get(target);
    if (first === undefined) oldest.set(target, row.id);
    if (events !== row.events || first !== undefined) {
      await sql`update webhook_endpoints set events = ${events}, duplicate_of = ${first ?? null}
        where id = ${row.id}`.execute(db);
    }
  }

  await db.schema
    .createIndex('webhook_endpoints_target')
    .unique()
    .on('webhook_endpoints')
    .columns(['account_id', 'url', 'events'])
    .where(sql.ref('duplicate_of'), 'is', null)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('webhook_endpoints_target').execute();
  await db.schema.alterTable('webhook_endpoints').dropColumn('duplicate_of').execute();
}

/**
 * The stored filter in canonical form: each pattern once, none a wildcard of it covers, sorted; as
 * stored when it is not a JSON array of strings (no release wrote one).
 */
function canonical(stored: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(stored);
  } catch {
    return stored;
  }
  if (!Array.isArray(parsed) || !parsed.every((item) => typeof item === 'string')) return stored;
  const kept = new Set(parsed);
  if (kept.has('*')) return JSON.stringify(['*']);
  return JSON.stringify(
    [...kept]
      .filter((pattern) => pattern.endsWith('.*') || !kept.has(`${pattern.slice(0, pattern.indexOf('.'))}.*`))
      .sort(),
  );
}
