import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type Kysely, Migrator, sql } from 'kysely';
import { openDatabase } from '../../src/db/database.ts';
import { migrations } from '../../src/db/migrate.ts';
import type { Database } from '../../src/db/schema.ts';
import { createTestDatabase, STORES, seedAccount } from '../helpers.ts';

/**
 * Migration 0010_webhook_acknowledged on each store, applied to a database that already has
 * endpoints: they keep delivering as before (their floor is their position), the new table keys
 * what each endpoint acknowledged and loses it with the endpoint, and `down` takes both away.
 */

const NOW = '2026-01-01T00:00:00.000Z';

async function insertEndpoint(db: Kysely<Database>, id: string, accountId: string, position: number) {
  // As the schema was before the migration: no `known_through`.
  await sql`insert into webhook_endpoints
      (id, account_id, url, events, state, secret, position, failed_attempts, created_by, created_at, updated_at)
    values (${id}, ${accountId}, 'https://bi.example.com/hook', '["*"]', 'active', 'sealed', ${position}, 0,
      'test', ${NOW}, ${NOW})`.execute(db);
}

for (const store of STORES) {
  describe(`migration 0010_webhook_acknowledged (${store})`, () => {
    test('existing endpoints know through their position; acknowledged records are kept per endpoint and deleted with it; down removes both', async () => {
      const database = await createTestDatabase(store);
      const handle = openDatabase(database.url);
      const { db } = handle;
      const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
      try {
        assert.equal((await migrator.migrateTo('0009_oauth_client_lifecycle')).error, undefined);
        const accountId = await seedAccount(db);
        await insertEndpoint(db, 'e1', accountId, 42);
        await insertEndpoint(db, 'e2', accountId, 7);

        const up = await migrator.migrateTo('0010_webhook_acknowledged');
        assert.equal(up.error, undefined);
        assert.deepEqual(
          up.results?.map((result) => [result.migrationName, result.status]),
          [['0010_webhook_acknowledged', 'Success']],
        );
        assert.deepEqual(
          await db
            .selectFrom('webhook_endpoints')
            .select(['id', 'position', 'known_through'])
            .orderBy('id')
            .execute(),
          [
            { id: 'e1', position: 42, known_through: 42 },
            { id: 'e2', position: 7, known_through: 7 },
          ],
        );

        const acknowledged = (endpointId: string, recordId: string, createdSeq: number) => ({
          endpoint_id: endpointId,
          record_type: 'incident',
          record_id: recordId,
          created_seq: createdSeq,
        });
        // The same record for two endpoints, and two types with one id for one endpoint.
        await db
          .insertInto('webhook_acknowledged')
          .values([
            acknowledged('e1', 'r1', 50),
            acknowledged('e2', 'r1', 9),
            { ...acknowledged('e1', 'r1', 51), record_type: 'user' },
          ])
          .execute();
        await assert.rejects(
          db
            .insertInto('webhook_acknowledged')
            .values(acknowledged('e1', 'r1', 60))
            .execute(),
          'one row per endpoint and record',
        );
        await db.deleteFrom('webhook_endpoints').where('id', '=', 'e1').execute();
        assert.deepEqual(
          await db.selectFrom('webhook_acknowledged').select(['endpoint_id', 'record_id']).execute(),
          [{ endpoint_id: 'e2', record_id: 'r1' }],
        );

        const down = await migrator.migrateDown();
        assert.equal(down.error, undefined);
        assert.deepEqual(
          down.results?.map((result) => [result.migrationName, result.status]),
          [['0010_webhook_acknowledged', 'Success']],
        );
        await assert.rejects(sql`select known_through from webhook_endpoints`.execute(db));
        await assert.rejects(sql`select endpoint_id from webhook_acknowledged`.execute(db));
        assert.deepEqual(await db.selectFrom('webhook_endpoints').select(['id', 'position']).execute(), [
          { id: 'e2', position: 7 },
        ]);
      } finally {
        await handle.destroy();
        await database.drop();
      }
    });
  });
}
