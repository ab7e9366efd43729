import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { type DatabaseHandle, openDatabase, type StoreName } from '../../src/db/database.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import { overHttp } from '../auth/two-instances.ts';
import {
  bearer,
  createTestDatabase,
  REDIS_URL,
  runCli,
  type ServerProcess,
  STORES,
  seedKey,
  startServer,
  type TestDatabase,
} from '../helpers.ts';
import { Receiver } from '../webhooks/receiver.ts';
import { accountRecords, importRecords } from './account-fixtures.ts';
import { sleep } from '../wait.ts';

/**
 * `accounts delete` against running servers: two real `safety-api serve` processes on one store
 * (PostgreSQL with Redis: the shared generation; SQLite: the commit watch), each having served the
 * account's key from its caches. When the command returns, both answer 401 for that key, and its
 * feed with it; the other account is served as before; the account's webhook endpoints deliver no
 * more.
 */

const SETTINGS: Record<StoreName, Record<string, string>> = {
  postgres: { REDIS_URL },
  sqlite: { REDIS_URL: '' },
};

for (const store of STORES) {
  describe(`accounts delete with two servers running (${store}${store === 'postgres' ? ' + Redis' : ''})`, () => {
    let database: TestDatabase;
    let handle: DatabaseHandle;
    let oldReceiver: Receiver;
    let newReceiver: Receiver;
    let env: Record<string, string>;
    let servers: ServerProcess[] = [];

    before(async () => {
      database = await createTestDatabase(store);
      handle = openDatabase(database.url);
      // Migrated before the servers start, so that they do not both migrate one new database at once.
      await migrateToLatest(handle.db);
      oldReceiver = await Receiver.start();
      newReceiver = await Receiver.start();
      env = {
        DATABASE_URL: database.url,
        WEBHOOKS_ALLOW_PRIVATE: 'true',
        ...SETTINGS[store],
      };
      servers = await Promise.all([startServer(env), startServer(env)]);
      for (const server of servers) {
        for (let i = 0; i < 200 && !server.logs().includes('webhook deliveries started'); i += 1)
          await sleep(50);
      }
    });
    after(async () => {
      await Promise.all(servers.map((server) => server.stop()));
      await oldReceiver.close();
      await newReceiver.close();
      await handle.destroy();
      await database.drop();
    });

    const cli = async (...args: string[]) => {
      const result = await runCli(args, env);
      assert.equal(result.code, 0, result.stderr);
      return result;
    };
    const incident = (accountId: string) => ({
      type: 'incident',
      id: randomUUID(),
      account_id: accountId,
      incident_number: 'INC-2030-1',
      status: 'open',
      created_at: new Date().toISOString(),
    });
    test("the account's key answers 401 on both instances as soon as the command returns; its webhooks stop", async () => {
      const instances = servers.map((server) => overHttp(server.url));
      const gone = randomUUID();
      const kept = randomUUID();
      await importRecords([...accountRecords(gone, 5), ...accountRecords(kept, 5)], env);
      const goneKey = await seedKey(handle.db, gone);
      const keptKey = await seedKey(handle.db, kept);

      // The endpoint delivers while the account exists.
      await cli(
        'webhooks',
        'create',
        '--account',
        gone,
        '--url',
        oldReceiver.url(),
        '--events',
        'incident.*',
      );
      const first = incident(gone);
      await importRecords([first], env);
      await oldReceiver.waitFor(1);
      assert.deepEqual(
        oldReceiver.received.map((r) => r.json.data.id),
        [first.id],
      );

      // The feed position at which both instances cache the account's first page below.
      const feedPosition = async () =>
        (
          await handle.db
            .selectFrom('accounts')
            .select('data_version')
            .where('id', '=', gone)
            .executeTakeFirstOrThrow()
        ).data_version;
      const cachedAt = await feedPosition();

      // Both instances serve the key from their caches, under load, while the command runs: a
      // row read before the commit could be served again for up to 5 s (KEY_ROW_MAX_AGE_MS) if
      // the servers were not told. Only requests sent after the command returned count.
      const keptPage = JSON.parse((await instances[0]!.pageOne(keptKey.rawKey)).body);
      let deletedAt: number | null = null;
      let servedBefore = 0;
      let servedAfter = 0;
      const refusedAfter: string[] = [];
      const load = async (instance: (typeof instances)[number]) => {
        while (servedAfter + refusedAfter.length < 100) {
          const sentAt = Date.now();
          const res = await instance.pageOne(goneKey.rawKey);
          if (deletedAt === null || sentAt <= deletedAt) {
            if (res.status === 200) servedBefore += 1;
          } else if (res.status === 200) servedAfter += 1;
          else refusedAfter.push(`${res.status} ${JSON.parse(res.body).error}`);
        }
      };
      const clients = instances.flatMap((instance) => Array.from({ length: 4 }, () => load(instance)));
      while (servedBefore < 20) await sleep(20);
      await cli('accounts', 'delete', '--account', gone, '--confirm', gone);
      deletedAt = Date.now();
      await Promise.all(clients);
      assert.equal(servedAfter, 0, 'no 200 after the command returned');
      assert.deepEqual(new Set(refusedAfter), new Set(['401 API_KEY_INVALID']));

      for (const [i, server] of servers.entries()) {
        const instance = instances[i]!;
        const page = await instance.pageOne(goneKey.rawKey);
        assert.equal(page.status, 401, `instance ${i + 1}: ${page.body}`);
        assert.equal(JSON.parse(page.body).error, 'API_KEY_INVALID');
        const feed = await fetch(`${server.url}/api/v1/public/changes`, { headers: bearer(goneKey.rawKey) });
        assert.equal(feed.status, 401, 'its feed is gone');
        const other = await instance.pageOne(keptKey.rawKey);
        assert.equal(other.status, 200);
        assert.deepEqual(JSON.parse(other.body), keptPage);
      }

      // The same account id comes back (a restore) with an endpoint of its own: that endpoint gets
      // the next change, and by then the deleted endpoint would have had it too; it had nothing.
      await importRecords([accountRecords(gone, 0)[0] as object], env);
      await cli(
        'webhooks',
        'create',
        '--account',
        gone,
        '--url',
        newReceiver.url(),
        '--events',
        'incident.*',
      );
      const next = incident(gone);
      await importRecords([next], env);
      await newReceiver.waitFor(1);
      assert.deepEqual(
        newReceiver.received.map((r) => r.json.data.id),
        [next.id],
      );
      assert.deepEqual(
        oldReceiver.received.map((r) => r.json.data.id),
        [first.id],
        'the deleted endpoint delivers no more',
      );

      // The account in its new life reaches the feed position at which both instances cached its
      // first page in its earlier life: they answer with its incidents now, not those of then.
      const restored = await feedPosition();
      assert.ok(restored < cachedAt, `a new feed starts low (${restored}, was ${cachedAt})`);
      await importRecords(
        Array.from({ length: cachedAt - restored }, () => incident(gone)),
        env,
      );
      assert.equal(await feedPosition(), cachedAt, 'the position at which the old page was cached');
      const newestFirst = (
        await handle.db
          .selectFrom('incidents')
          .select('id')
          .where('account_id', '=', gone)
          .orderBy('created_at', 'desc')
          .orderBy('id', 'desc')
          .execute()
      ).map((row) => row.id);
      const restoredKey = await seedKey(handle.db, gone);
      for (const [i, instance] of instances.entries()) {
        const page = await instance.pageOne(restoredKey.rawKey);
        assert.equal(page.status, 200, `instance ${i + 1}: ${page.body}`);
        const { data, pagination } = JSON.parse(page.body).data;
        assert.equal(pagination.total, newestFirst.length, `instance ${i + 1}: the count of now`);
        assert.deepEqual(
          data.map((item: { id: string }) => item.id),
          newestFirst.slice(0, data.length),
          `instance ${i + 1}: the incidents of now`,
        );
      }
    });
  });
}
