import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { KEY_ROW_MAX_AGE_MS } from '../../src/auth/key-lookup.ts';
import { apiKeyService } from '../../src/services/api-key-service.ts';
import { freePort, type OwnRedis, startRedis, startRelay } from '../faults/harness.ts';
import {
  captureLog,
  createSecondInstance,
  createTestContext,
  REDIS_URL,
  runCli,
  STORES,
  seedAccount,
  seedIncidents,
  seedKey,
  type TestContext,
} from '../helpers.ts';
import { AdminClient, seedUser } from '../routes/admin/admin-helpers.ts';
import { exactnessOnTwoInstances, inProcess, pageOne } from './two-instances.ts';
import { sleep, until } from '../wait.ts';

/**
 * PostgreSQL with Redis: key and account rows are reused while the shared generation in Redis is
 * unchanged, and every writer bumps it after its commit. The cases every store shares are in
 * `two-instances.ts`; SQLite runs them in `commit-watch-instances.test.ts`.
 */

/**
 * Counts the statements this process sends to PostgreSQL, but for the last-use writer's: it runs
 * on a timer every few seconds, not per request, and would make the counts depend on timing.
 */
function countPostgresQueries(): { count(): number; stop(): void } {
  const proto = pg.Client.prototype;
  const original = proto.query;
  let seen = 0;
  proto.query = function (this: pg.Client, ...args: unknown[]) {
    const [first] = args;
    const text = typeof first === 'string' ? first : JSON.stringify(first);
    if (!text.includes('last_used_at')) seen += 1;
    return Reflect.apply(original, this, args);
  } as typeof original;
  return {
    count: () => seen,
    stop: () => {
      proto.query = original;
    },
  };
}

/** The statements `requests` page-1 requests send to PostgreSQL, each answered 200. */
async function queriesFor(app: FastifyInstance, rawKey: string, requests: number): Promise<number> {
  const counter = countPostgresQueries();
  try {
    for (let i = 0; i < requests; i += 1) assert.equal((await pageOne(app, rawKey)).statusCode, 200);
    return counter.count();
  } finally {
    counter.stop();
  }
}

if (STORES.includes('postgres')) {
  describe('two instances on one PostgreSQL and one Redis', () => {
    let one: TestContext;
    let two: Awaited<ReturnType<typeof createSecondInstance>>;
    let env: Record<string, string>;
    before(async () => {
      one = await createTestContext('postgres', { REDIS_URL });
      two = await createSecondInstance(one);
      env = { DATABASE_URL: one.databaseUrl, REDIS_URL };
    });
    after(async () => {
      await two.close();
      await one.close();
    });

    const both = () => [one.app, two.app];

    test('repeated cached page-1 requests send nothing to PostgreSQL while nothing changes', async (t) => {
      const accountId = await seedAccount(one.db);
      await seedIncidents(one.db, accountId, 30);
      const key = await seedKey(one.db, accountId);
      // The requests' clock stands still: on a loaded machine 100 requests can outlast the rows'
      // maximum age (KEY_ROW_MAX_AGE_MS), whose re-read is another test's subject.
      t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
      // The first request of each instance reads the rows and produces the body.
      for (const app of both()) assert.equal((await pageOne(app, key.rawKey)).statusCode, 200);
      for (const app of both()) assert.equal(await queriesFor(app, key.rawKey, 50), 0);
      t.mock.timers.reset();

      // Without Redis, every request reads the key and account.
      const alone = await createTestContext('postgres');
      try {
        const aloneAccount = await seedAccount(alone.db);
        const aloneKey = await seedKey(alone.db, aloneAccount);
        assert.equal((await pageOne(alone.app, aloneKey.rawKey)).statusCode, 200);
        assert.equal(await queriesFor(alone.app, aloneKey.rawKey, 50), 50);
      } finally {
        await alone.close();
      }
    });

    test('a change made in SQL applies once "cache bump" has run', async (t) => {
      const accountId = await seedAccount(one.db);
      const key = await seedKey(one.db, accountId);
      // The requests' clock stands still, so the rows never reach their maximum age here.
      t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
      const limit = async (app: FastifyInstance) =>
        (await pageOne(app, key.rawKey)).headers['x-ratelimit-limit'];
      for (const app of both()) assert.equal(await limit(app), '1000');
      await one.db
        .updateTable('accounts')
        .set({ rate_limit_per_hour: 700 })
        .where('id', '=', accountId)
        .execute();
      // The instances cannot know of a write that went around every writer of the application...
      for (const app of both()) assert.equal(await limit(app), '1000');
      const result = await runCli(['cache', 'bump'], env);
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stdout, /^Bumped/);
      // ...until the operator says so.
      for (const app of both()) assert.equal(await limit(app), '700');
    });

    test('a change no writer could bump applies once the rows read before it are KEY_ROW_MAX_AGE_MS old', async (t) => {
      const accountId = await seedAccount(one.db);
      const key = await seedKey(one.db, accountId);
      // The requests' clock (`new Date()` in the key check), moved by the test alone.
      t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
      for (const app of both()) assert.equal((await pageOne(app, key.rawKey)).statusCode, 200);

      // Committed and never bumped, as a CLI cut off from Redis or killed after its commit leaves it;
      // neither instance saw an outage, so neither dropped its rows.
      await apiKeyService.revoke(one.db, key.id, 'test');
      t.mock.timers.tick(KEY_ROW_MAX_AGE_MS - 1);
      for (const app of both()) assert.equal((await pageOne(app, key.rawKey)).statusCode, 200, 'the gap');
      t.mock.timers.tick(1);
      for (const app of both()) {
        const res = await pageOne(app, key.rawKey);
        assert.equal(res.statusCode, 401);
        assert.equal(res.json().error, 'API_KEY_INVALID');
      }
    });

    test('a change in the admin panel of one instance applies at the next request of the other', async () => {
      const accountId = await seedAccount(one.db);
      const key = await seedKey(one.db, accountId);
      const admin = await seedUser(one.db, accountId);
      const panel = new AdminClient(two.app);
      assert.equal((await panel.signIn(admin.email)).statusCode, 303);
      assert.equal((await pageOne(one.app, key.rawKey)).statusCode, 200);

      const page = await panel.get(`/admin/settings/integrations/api-keys/${key.id}`);
      const res = await panel.submit(page.body, `/admin/settings/integrations/api-keys/${key.id}/disable`);
      assert.equal(res.statusCode, 303);
      assert.equal((await pageOne(one.app, key.rawKey)).json().error, 'API_KEY_INVALID');
    });

    exactnessOnTwoInstances(() => ({
      instances: both().map(inProcess),
      db: one.db,
      cliEnv: env,
    }));
  });

  describe('PostgreSQL with a Redis that stops answering', () => {
    let redis: OwnRedis;
    let ctx: TestContext;
    before(async () => {
      redis = await startRedis();
      ctx = await createTestContext('postgres', { REDIS_URL: redis.url });
    });
    after(async () => {
      await ctx.close();
      await redis.stop();
    });

    test('every request reads PostgreSQL, answers 200, and sees writes that could not bump', async () => {
      const accountId = await seedAccount(ctx.db);
      await seedIncidents(ctx.db, accountId, 5);
      const key = await seedKey(ctx.db, accountId);
      assert.equal((await pageOne(ctx.app, key.rawKey)).statusCode, 200);
      assert.equal(await queriesFor(ctx.app, key.rawKey, 5), 0);

      redis.process.kill('SIGSTOP');
      try {
        assert.ok((await queriesFor(ctx.app, key.rawKey, 5)) >= 5, 'each request reads the key');
        // Written around the generation, as a writer that cannot reach Redis does.
        await apiKeyService.disable(ctx.db, key.id, 'test');
        assert.equal((await pageOne(ctx.app, key.rawKey)).json().error, 'API_KEY_INVALID');
      } finally {
        redis.process.kill('SIGCONT');
      }
      // Redis is back with the generation the rows were first read under: they are gone all the
      // same. Asked once the instance keeps rows again: another key, asked twice, is read once.
      const other = await seedKey(ctx.db, accountId);
      await until(
        async () => {
          await queriesFor(ctx.app, other.rawKey, 1);
          return (await queriesFor(ctx.app, other.rawKey, 1)) === 0;
        },
        10_000,
        'the instance to keep rows again (Redis asked after the suspicion)',
      );
      assert.equal((await pageOne(ctx.app, key.rawKey)).json().error, 'API_KEY_INVALID');
    });

    test('a CLI change that cannot reach Redis is saved, printed, and warned about with exit 0', async () => {
      const accountId = await seedAccount(ctx.db);
      const key = await seedKey(ctx.db, accountId);
      const nowhere = `redis://127.0.0.1:${await freePort()}`;
      const result = await runCli(['keys', 'disable', key.id], {
        DATABASE_URL: ctx.databaseUrl,
        REDIS_URL: nowhere,
      });
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stdout, new RegExp(`^${key.id}  .*  disabled  `));
      assert.match(
        result.stderr,
        /^safety-api: warning: the change is saved, but the servers could not be told .*"safety-api cache bump"\n$/,
      );
      assert.equal((await pageOne(ctx.app, key.rawKey)).json().error, 'API_KEY_INVALID');

      // A list changes nothing, so it has nothing to tell the servers, and works without Redis.
      const list = await runCli(['keys', 'list', '--account', accountId, '--json'], {
        DATABASE_URL: ctx.databaseUrl,
        REDIS_URL: nowhere,
      });
      assert.equal(list.code, 0, list.stderr);
      assert.equal(list.stderr, '');
      assert.equal(JSON.parse(list.stdout)[0].state, 'disabled');
    });

    test('a panel cut off from Redis keeps trying its bump, and the other instance sees the change once it lands', async (t) => {
      const relay = await startRelay(redis.url);
      const log = captureLog();
      const panelInstance = await createSecondInstance(
        ctx,
        { redisUrl: relay.url, logLevel: 'info' },
        { logStream: log.stream },
      );
      try {
        const accountId = await seedAccount(ctx.db);
        const key = await seedKey(ctx.db, accountId);
        const admin = await seedUser(ctx.db, accountId);
        const panel = new AdminClient(panelInstance.app);
        assert.equal((await panel.signIn(admin.email)).statusCode, 303);
        // The requests' clock stands still, so only the bump, never the rows' age, can end the gap.
        t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
        assert.equal((await pageOne(ctx.app, key.rawKey)).statusCode, 200);

        // Only the panel's instance loses Redis: the other one sees no outage and keeps its rows.
        relay.cut();
        const page = await panel.get(`/admin/settings/integrations/api-keys/${key.id}`);
        const res = await panel.submit(page.body, `/admin/settings/integrations/api-keys/${key.id}/disable`);
        assert.equal(res.statusCode, 303, 'the change is saved');
        assert.match(log.text(), /Redis did not take the cache bump/);
        assert.equal((await pageOne(ctx.app, key.rawKey)).statusCode, 200, 'the gap: no bump, no news');

        relay.heal();
        // Up to 10 s, counted in sleeps: `Date` stands still.
        let status = 200;
        for (let i = 0; status === 200 && i < 100; i += 1) {
          await sleep(100);
          status = (await pageOne(ctx.app, key.rawKey)).statusCode;
        }
        assert.equal(status, 401, 'seen without anyone running "cache bump"');
        // The other instance can see the bump before its reply reaches the panel, which logs then.
        for (let i = 0; !/Redis took the cache bump/.test(log.text()) && i < 100; i += 1) await sleep(100);
        assert.match(log.text(), /Redis took the cache bump/);
      } finally {
        await panelInstance.close();
        await relay.close();
      }
    });

    test('after a Redis failover that lost the last bump, the rows read before it are not served', async () => {
      const accountId = await seedAccount(ctx.db);
      const key = await seedKey(ctx.db, accountId);
      assert.equal((await pageOne(ctx.app, key.rawKey)).statusCode, 200);

      // A failover that lost the bump, as the instance sees it: the write is committed, the Redis it
      // reconnects to still holds the generation its rows were read under, and in between its
      // connections were closed (a Sentinel failover closes them with CLIENT KILL). No request
      // arrives while they are down, so no request saw the outage.
      const inspect = redis.inspect();
      const connected = async () =>
        String(await inspect.client('LIST'))
          .trim()
          .split('\n').length;
      const before = await connected();
      await apiKeyService.disable(ctx.db, key.id, 'test');
      await inspect.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
      await until(async () => (await connected()) >= before, 10_000, 'the instance to reconnect', 20);
      assert.equal(await connected(), before, 'the instance reconnected');

      assert.equal((await pageOne(ctx.app, key.rawKey)).json().error, 'API_KEY_INVALID');
    });

    test('a row is not served by a count that was on its way while the rows were dropped', async () => {
      const accountId = await seedAccount(ctx.db);
      const key = await seedKey(ctx.db, accountId);
      assert.equal((await pageOne(ctx.app, key.rawKey)).statusCode, 200);
      await apiKeyService.disable(ctx.db, key.id, 'test');

      // The connection closes (and the rows are dropped) after the request took its remembered row
      // and before its count is answered, by a Redis holding the same generation.
      const limiter = ctx.app.rateLimiter;
      const consume = limiter.consume;
      limiter.consume = (keyId, allowance) => {
        limiter.consume = consume;
        ctx.app.keyLookup.forgetAll();
        return consume.call(limiter, keyId, allowance);
      };
      try {
        assert.equal((await pageOne(ctx.app, key.rawKey)).json().error, 'API_KEY_INVALID');
      } finally {
        limiter.consume = consume;
      }
    });

    test('"cache bump" says when there is nothing to bump', async () => {
      const result = await runCli(['cache', 'bump'], { DATABASE_URL: ctx.databaseUrl, REDIS_URL: '' });
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stdout, /^Nothing to bump/);
    });
  });
}
