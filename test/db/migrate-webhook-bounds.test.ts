import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type Kysely, Migrator, sql } from 'kysely';
import { openDatabase } from '../../src/db/database.ts';
import { migrations } from '../../src/db/migrate.ts';
import type { Database } from '../../src/db/schema.ts';
import { createTestDatabase, STORES, seedAccount } from '../helpers.ts';

/**
 * Migration 0012_webhook_endpoint_bounds on each store, applied to endpoints that already repeat
 * one another's URL and filter: every filter becomes canonical, the repeats are kept and named
 * after the oldest of their group, the store refuses a new repeat, and `down` takes it all away.
 */

async function insertEndpoint(
  db: Kysely<Database>,
  endpoint: { id: string; accountId: string; url: string; events: string; createdAt: string },
) {
  // As the schema was before the migration: no `duplicate_of`.
  await sql`insert into webhook_endpoints
      (id, account_id, url, events, state, secret, position, failed_attempts, created_by, created_at, updated_at)
    values (${endpoint.id}, ${endpoint.accountId}, ${endpoint.url}, ${endpoint.events}, 'active', 'sealed', 0, 0,
      'test', ${endpoint.createdAt}, ${endpoint.createdAt})`.execute(db);
}

for (const store of STORES) {
  describe(`migration 0012_webhook_endpoint_bounds (${store})`, () => {
    test('filters become canonical, existing repeats are kept and marked, new ones are refused; down removes it', async () => {
      const database = await createTestDatabase(store);
      const handle = openDatabase(database.url);
      const { db } = handle;
      const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
      try {
        assert.equal((await migrator.migrateTo('0011_webhook_previous_secrets')).error, undefined);
        const [a, b] = [await seedAccount(db), await seedAccount(db)];
        const hook = 'https://bi.example.com/hook';
        const at = (minute: number) => `2026-01-01T00:0${minute}:00.000Z`;
        const endpoints = [
          { id: 'e1', accountId: a, url: hook, events: '["user.*","incident.*"]', createdAt: at(1) },
          // The same filter as e1, spelled otherwise, and later: a repeat.
          {
            id: 'e2',
            accountId: a,
            url: hook,
            events: '["incident.*","user.deleted","user.*"]',
            createdAt: at(2),
          },
          { id: 'e3', accountId: a, url: hook, events: '["*","incident.created"]', createdAt: at(3) },
          { id: 'e4', accountId: a, url: hook, events: '["*"]', createdAt: at(4) },
          // Another account, or another URL: not repeats.
          { id: 'e5', accountId: b, url: hook, events: '["*"]', createdAt: at(5) },
          { id: 'e6', accountId: a, url: `${hook}/2`, events: '["*"]', createdAt: at(6) },
        ];
        for (const endpoint of endpoints) await insertEndpoint(db, endpoint);

        const up = await migrator.migrateTo('0012_webhook_endpoint_bounds');
        assert.equal(up.error, undefined);
        assert.deepEqual(
          await db
            .selectFrom('webhook_endpoints')
            .select(['id', 'events', 'duplicate_of', 'state'])
            .orderBy('id')
            .execute(),
          [
            { id: 'e1', events: '["incident.*","user.*"]', duplicate_of: null, state: 'active' },
            { id: 'e2', events: '["incident.*","user.*"]', duplicate_of: 'e1', state: 'active' },
            { id: 'e3', events: '["*"]', duplicate_of: null, state: 'active' },
            { id: 'e4', events: '["*"]', duplicate_of: 'e3', state: 'active' },
            { id: 'e5', events: '["*"]', duplicate_of: null, state: 'active' },
            { id: 'e6', events: '["*"]', duplicate_of: null, state: 'active' },
          ],
        );
        await assert.rejects(
          insertEndpoint(db, { id: 'e7', accountId: a, url: hook, events: '["*"]', createdAt: at(7) }),
          /unique|duplicate/i,
          'the store refuses a new repeat',
        );
        // A repeat whose URL changes joins the rule.
        await db
          .updateTable('webhook_endpoints')
          .set({ url: `${hook}/3`, duplicate_of: null })
          .where('id', '=', 'e4')
          .execute();

        const down = await migrator.migrateTo('0011_webhook_previous_secrets');
        assert.equal(down.error, undefined);
        await insertEndpoint(db, { id: 'e7', accountId: a, url: hook, events: '["*"]', createdAt: at(7) });
        const columns = (await db.introspection.getTables()).find(
          (table) => table.name === 'webhook_endpoints',
        )?.columns;
        assert.ok(columns !== undefined && !columns.some((column) => column.name === 'duplicate_of'));
      } finally {
        await handle.destroy();
        await database.drop();
      }
    });
  });
}
