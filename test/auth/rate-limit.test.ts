import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Redis } from 'ioredis';
import { PublicRateLimiter } from '../../src/auth/rate-limit.ts';
import { openRedis, redisReady } from '../../src/redis.ts';
import { apiKeyService } from '../../src/services/api-key-service.ts';
import { type OwnRedis, startRedis } from '../faults/harness.ts';
import {
  bearer,
  createSecondInstance,
  createTestContext,
  REDIS_URL,
  STORES,
  seedAccount,
  seedIncidents,
  seedKey,
  type TestContext,
} from '../helpers.ts';

/**
 * The count of a public request also reads the shared generation (PostgreSQL with Redis), so that a
 * request served from rows read earlier makes one Redis round trip and no PostgreSQL one.
 */

describe('counting reads the shared generation', () => {
  const redis = openRedis(REDIS_URL);
  after(() => redis.quit());

  // Database names may hold any character: none may break out of the script's string literal.
  for (const name of ['plain', 'quote" ) return {1} --', "it's\\n\nnew\0line", 'naïve ünïcode ✓']) {
    test(`returns the value at the generation key, whatever its name (${JSON.stringify(name)})`, async () => {
      assert.ok(await redisReady(redis), 'test Redis answers');
      const generationKey = `safety-api-test:generation:${randomUUID()}:${name}`;
      const limiter = new PublicRateLimiter(redis, {
        generationKey,
        keyPrefix: `safety-api-test:rl:${randomUUID()}`,
      });
      assert.equal(limiter.readsGeneration, true);
      const keyId = randomUUID();

      const none = await limiter.consume(keyId, 10);
      assert.equal(none.generation, null, 'no value yet');
      assert.equal(none.remaining, 9);

      await redis.set(generationKey, 'first');
      const first = await limiter.consume(keyId, 10);
      assert.equal(first.generation, 'first');
      assert.equal(first.remaining, 8, 'still counts');

      await redis.set(generationKey, 'second');
      assert.equal((await limiter.consume(keyId, 10)).generation, 'second');
      await redis.del(generationKey);
    });
  }

  test('without a generation key, or without Redis, no generation is read', async () => {
    const prefix = `safety-api-test:rl:${randomUUID()}`;
    const withoutKey = new PublicRateLimiter(redis, { keyPrefix: prefix });
    assert.equal(withoutKey.readsGeneration, false);
    assert.equal((await withoutKey.consume(randomUUID(), 5)).generation, null);

    const inMemory = new PublicRateLimiter(null, { generationKey: 'safety-api-test:generation:x' });
    assert.equal(inMemory.readsGeneration, false);
    assert.equal((await inMemory.consume(randomUUID(), 5)).generation, null);
  });
});

if (STORES.includes('postgres')) {
  /** Redis commands run so far, by name, on a Redis of the test's own (no other test adds to them). */
  async function commandCalls(client: Redis): Promise<Map<string, number>> {
    const calls = new Map<string, number>();
    for (const match of (await client.info('commandstats')).matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) {
      calls.set(match[1] as string, Number(match[2]));
    }
    return calls;
  }

  describe('a cached page-1 request on PostgreSQL with Redis', () => {
    let own: OwnRedis;
    let probe: Redis;
    let ctx: TestContext;
    before(async () => {
      own = await startRedis();
      probe = own.inspect();
      ctx = await createTestContext('postgres', { REDIS_URL: own.url });
    });
    after(async () => {
      await ctx.close();
      await own.stop();
    });

    test('sends Redis one command: the count, which also confirms the row', async () => {
      const accountId = await seedAccount(ctx.db, { rate_limit_per_hour: 1000 });
      await seedIncidents(ctx.db, accountId, 3);
      const key = await seedKey(ctx.db, accountId);
      const get = () => ctx.app.inject({ url: '/api/v1/public/incidents', headers: bearer(key.rawKey) });
      // The first request reads the row (generation, then PostgreSQL); the rest reuse it.
      assert.equal((await get()).statusCode, 200);

      const before = await commandCalls(probe);
      const requests = 20;
      for (let i = 0; i < requests; i += 1) {
        const response = await get();
        assert.equal(response.statusCode, 200);
        assert.equal(response.headers['x-ratelimit-remaining'], String(1000 - 2 - i), 'each counted once');
      }
      const after = await commandCalls(probe);
      const ran = Object.fromEntries(
        [...after]
          .map(([name, calls]) => [name, calls - (before.get(name) ?? 0)])
          .filter(([name, calls]) => name !== 'info' && calls !== 0),
      );
      // One EVALSHA sent per request; the SET NX, INCRBY, PTTL and GET are the script's own.
      assert.deepEqual(ran, {
        evalsha: requests,
        set: requests,
        incrby: requests,
        pttl: requests,
        get: requests,
      });
    });

    test('requests of one key arriving together: one count for all, each its own remaining, the refused given back', async () => {
      const allowance = 12;
      const accountId = await seedAccount(ctx.db, { rate_limit_per_hour: allowance });
      await seedIncidents(ctx.db, accountId, 3);
      const key = await seedKey(ctx.db, accountId);
      const get = () => ctx.app.inject({ url: '/api/v1/public/incidents', headers: bearer(key.rawKey) });
      assert.equal((await get()).statusCode, 200, 'the row is read and remembered');

      const before = await commandCalls(probe);
      const responses = await Promise.all(Array.from({ length: 20 }, get));
      const after = await commandCalls(probe);
      const sent = (name: string) => (after.get(name) ?? 0) - (before.get(name) ?? 0);

      const allowed = responses.filter((r) => r.statusCode === 200);
      assert.equal(allowed.length, allowance - 1, 'exactly what was left of the allowance');
      assert.deepEqual(
        allowed.map((r) => Number(r.headers['x-ratelimit-remaining'])).sort((a, b) => b - a),
        Array.from({ length: allowance - 1 }, (_, i) => allowance - 2 - i),
        'each allowed request counted once, in turn',
      );
      for (const refused of responses.filter((r) => r.statusCode !== 200)) {
        assert.equal(refused.statusCode, 429);
        assert.equal(refused.json().error, 'RATE_LIMIT_EXCEEDED');
        assert.equal(refused.headers['x-ratelimit-remaining'], '0');
      }
      assert.ok(
        sent('evalsha') < responses.length,
        `${sent('evalsha')} counts for ${responses.length} requests`,
      );
      assert.equal(
        Number(await probe.get(`safety-api:rl:${key.id}`)),
        allowance,
        'the refused ones not kept',
      );
    });

    test('after a write on another instance, the count is given back and the row read again', async () => {
      const accountId = await seedAccount(ctx.db, { rate_limit_per_hour: 1000 });
      const key = await seedKey(ctx.db, accountId);
      const other = await createSecondInstance(ctx);
      try {
        const get = () => ctx.app.inject({ url: '/api/v1/public/incidents', headers: bearer(key.rawKey) });
        assert.equal((await get()).headers['x-ratelimit-remaining'], '999');
        assert.equal((await get()).headers['x-ratelimit-remaining'], '998');

        // A scope change keeps the key usable: the next request must be counted exactly once.
        await apiKeyService.setScope(ctx.db, key.id, 'read-write', 'test');
        await other.runtime.sharedGeneration?.bump();
        assert.equal((await get()).headers['x-ratelimit-remaining'], '997', 'not counted twice');

        await apiKeyService.revoke(ctx.db, key.id, 'test');
        await other.runtime.sharedGeneration?.bump();
        const revoked = await get();
        assert.equal(revoked.statusCode, 401);
        assert.equal(revoked.json().error, 'API_KEY_INVALID');
        assert.equal(revoked.headers['x-ratelimit-remaining'], undefined);
        const count = Number(await probe.get(`safety-api:rl:${key.id}`));
        assert.equal(count, 3, 'the 401 counted nothing');
      } finally {
        await other.close();
      }
    });
  });
}
