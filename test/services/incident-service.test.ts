import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type DatabaseHandle, openDatabase } from '../../src/db/database.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import { cacheBudgets, DEFAULT_CACHE_MAX_MB } from '../../src/config.ts';
import { IncidentService } from '../../src/services/incident-service.ts';
import { createTestDatabase, STORES, seedAccount, seedIncidents, type TestDatabase } from '../helpers.ts';

/** The accounts' `created_at` (seedAccount's): what tells an account's lives apart. */
const CREATED_AT = '2026-01-01T00:00:00.000Z';

const INCIDENTS = 7;

/** The one paging path of both APIs: an offset and a limit into the newest-first list. */
for (const store of STORES) {
  describe(`incident service (${store})`, () => {
    let database: TestDatabase;
    let handle: DatabaseHandle;
    let service: IncidentService;
    let accountId: string;
    let otherAccountId: string;
    // Newest first, as every list shows them.
    let newestFirst: string[];

    before(async () => {
      database = await createTestDatabase(store);
      handle = openDatabase(database.url);
      await migrateToLatest(handle.db);
      service = new IncidentService(handle.db, cacheBudgets(DEFAULT_CACHE_MAX_MB).rankMaps);
      const { db } = handle;
      accountId = await seedAccount(db);
      otherAccountId = await seedAccount(db);
      const rows = await seedIncidents(db, accountId, INCIDENTS, (i) => ({
        severity_likelihood: i % 2 === 0 ? 2 : null,
      }));
      newestFirst = rows.map((row) => row.id).reverse();
    });
    after(async () => {
      await handle.destroy();
      await database.drop();
    });

    const ids = async (offset: number, limit: number, total = INCIDENTS) =>
      (
        await service.listNewestFirst(
          accountId,
          { total, version: 0, incarnation: CREATED_AT },
          offset,
          limit,
        )
      ).map((i) => i.id);

    test('any offset and limit is that slice of the newest-first list', async () => {
      for (let offset = 0; offset <= INCIDENTS + 1; offset += 1) {
        for (const limit of [1, 2, 3, INCIDENTS, INCIDENTS + 5]) {
          assert.deepEqual(
            await ids(offset, limit),
            newestFirst.slice(offset, offset + limit),
            `offset ${offset}, limit ${limit}`,
          );
        }
      }
    });

    test('an offset far past the end, or an account without incidents, gives none', async () => {
      assert.deepEqual(await ids(Number.MAX_SAFE_INTEGER, 200), []);
      assert.deepEqual(
        await service.listNewestFirst(
          otherAccountId,
          { total: 0, version: 0, incarnation: CREATED_AT },
          0,
          50,
        ),
        [],
      );
    });

    test('totals hold the account incident count; findById maps the row as the APIs show it', async () => {
      assert.equal((await service.totals(accountId)).total, INCIDENTS);
      assert.equal((await service.totals(otherAccountId)).total, 0);
      const oldest = await service.findById(accountId, newestFirst.at(-1) as string);
      assert.equal(oldest?.incident_number, 'INC-2025-1');
      assert.equal(oldest?.severity_score, 6);
      const second = await service.findById(accountId, newestFirst.at(-2) as string);
      assert.equal(second?.severity_score, null);
      assert.equal(await service.findById(otherAccountId, newestFirst[0] as string), undefined);
    });
  });
}
