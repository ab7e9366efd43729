import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type DatabaseHandle, openDatabase } from '../../src/db/database.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import {
  createTestDatabase,
  type ServerProcess,
  STORES,
  seedAccount,
  seedKey,
  startServer,
  type TestDatabase,
} from '../helpers.ts';
import { exactnessOnTwoInstances, type Instance, overHttp } from './two-instances.ts';

/**
 * SQLite: two real `safety-api serve` processes on one database file, as production runs them,
 * each with its own connections and caches, and no Redis. Each reuses a key row it read earlier
 * only while the commit watch (`src/db/sqlite/commit-watch.ts`) shows nothing committed since, by any
 * connection of any process. The cases every store shares are in `two-instances.ts`.
 */

if (STORES.includes('sqlite')) {
  describe('two server processes on one SQLite file', () => {
    let database: TestDatabase;
    let handle: DatabaseHandle;
    let servers: ServerProcess[] = [];
    let instances: Instance[];
    before(async () => {
      database = await createTestDatabase('sqlite');
      // Migrated before the servers start, so that they do not both migrate one new file at once.
      handle = openDatabase(database.url);
      await migrateToLatest(handle.db);
      const env = { DATABASE_URL: database.url, REDIS_URL: '' };
      servers = await Promise.all([startServer(env), startServer(env)]);
      instances = servers.map((server) => overHttp(server.url));
    });
    after(async () => {
      await Promise.all(servers.map((server) => server.stop()));
      await handle.destroy();
      await database.drop();
    });

    test('a change made in SQL by another connection applies at the next request, with no command', async () => {
      const accountId = await seedAccount(handle.db);
      const key = await seedKey(handle.db, accountId);
      const limit = async (instance: Instance) =>
        (await instance.pageOne(key.rawKey)).headers.get('x-ratelimit-limit');
      for (const instance of instances) assert.equal(await limit(instance), '1000');
      await handle.db
        .updateTable('accounts')
        .set({ rate_limit_per_hour: 700 })
        .where('id', '=', accountId)
        .execute();
      for (const instance of instances) assert.equal(await limit(instance), '700');
    });

    exactnessOnTwoInstances(() => ({
      instances,
      db: handle.db,
      cliEnv: { DATABASE_URL: database.url },
    }));
  });
}
