import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { PublicRateLimiter } from '../../../src/auth/rate-limit.ts';
import { openRedis, redisReady } from '../../../src/redis.ts';
import {
  bearer,
  createTestContext,
  REDIS_URL,
  STORES,
  seedAccount,
  seedKey,
  type TestContext,
} from '../../helpers.ts';

/**
 * A refund (a 304's, a refused request's) belongs to the window the request was counted in. A
 * two-second window stands in for the hour; the Redis limiter uses a key prefix of its own.
 */
describe('rate limit refunds stay in their window', () => {
  const redis = openRedis(REDIS_URL);
  after(() => redis.quit());

  for (const backend of ['memory', 'redis'] as const) {
    test(`a refund after the window rolled over gives nothing back (${backend})`, async () => {
      if (backend === 'redis') assert.ok(await redisReady(redis), 'test Redis answers');
      const limiter = new PublicRateLimiter(backend === 'redis' ? redis : null, {
        keyPrefix: `safety-api-test:rl:${randomUUID()}`,
        windowSeconds: 2,
      });
      const key = randomUUID();
      const counted = await limiter.consume(key, 5);
      assert.equal(counted.remaining, 4);
      // Within the window: given back.
      assert.equal(await limiter.refund(key, counted), true);
      const again = await limiter.consume(key, 5);
      assert.equal(again.remaining, 4);

      await sleep(2100);
      // The window `again` was counted in is over: its refund must not open the next one at -1.
      assert.equal(await limiter.refund(key, again), false);
      const next = await limiter.consume(key, 5);
      assert.equal(next.remaining, 4, 'the new window starts from a full allowance, not above it');
      assert.ok(next.endsAtMs > again.endsAtMs);
    });
  }
});

for (const store of STORES) {
  describe(`rate limiting (${store})`, () => {
    let ctx: TestContext;

    before(async () => {
      ctx = await createTestContext(store);
    });
    after(() => ctx.close());

    test('headers on 200 and 404, 429 with Retry-After and without X-RateLimit-Reset, per key', async () => {
      const accountId = await seedAccount(ctx.db, { rate_limit_per_hour: 3 });
      const key = await seedKey(ctx.db, accountId);
      const get = (url = '/api/v1/public/departments') =>
        ctx.app.inject({ method: 'GET', url, headers: bearer(key.rawKey) });

      const before = Math.floor(Date.now() / 1000);
      const first = await get();
      const after = Math.ceil(Date.now() / 1000);
      assert.equal(first.statusCode, 200);
      assert.equal(first.headers['x-ratelimit-limit'], '3');
      assert.equal(first.headers['x-ratelimit-remaining'], '2');
      const reset = Number(first.headers['x-ratelimit-reset']);
      // An absolute epoch time an hour after the window opened (during the request), not a countdown.
      assert.ok(
        reset >= before + 3600 && reset <= after + 3600,
        `${reset} not in ${before}..${after} + 3600`,
      );

      const missing = await get(`/api/v1/public/incidents/${randomUUID()}`);
      assert.equal(missing.statusCode, 404);
      assert.equal(missing.headers['x-ratelimit-remaining'], '1');
      assert.equal(Number(missing.headers['x-ratelimit-reset']), reset);

      assert.equal((await get()).headers['x-ratelimit-remaining'], '0');

      for (let i = 0; i < 2; i += 1) {
        const limited = await get();
        assert.equal(limited.statusCode, 429);
        assert.equal(limited.json().error, 'RATE_LIMIT_EXCEEDED');
        assert.equal(typeof limited.json().message, 'string');
        const retryAfter = Number(limited.headers['retry-after']);
        assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 3600, String(retryAfter));
        assert.equal(limited.headers['x-ratelimit-reset'], undefined);
        assert.equal(limited.headers['x-ratelimit-limit'], '3');
        assert.equal(limited.headers['x-ratelimit-remaining'], '0');
      }

      // Another key of the same account has a window of its own.
      const other = await seedKey(ctx.db, accountId);
      const fresh = await ctx.app.inject({
        method: 'GET',
        url: '/api/v1/public/users',
        headers: bearer(other.rawKey),
      });
      assert.equal(fresh.statusCode, 200);
      assert.equal(fresh.headers['x-ratelimit-remaining'], '2');
    });

    test('401s count nothing; a raised allowance applies at the next request', async () => {
      const accountId = await seedAccount(ctx.db, { rate_limit_per_hour: 2 });
      const key = await seedKey(ctx.db, accountId);
      for (let i = 0; i < 5; i += 1) {
        await ctx.app.inject({
          method: 'GET',
          url: '/api/v1/public/users',
          headers: { authorization: 'Bearer nope' },
        });
      }
      const res = await ctx.app.inject({
        method: 'GET',
        url: '/api/v1/public/users',
        headers: bearer(key.rawKey),
      });
      assert.equal(res.headers['x-ratelimit-remaining'], '1');
      await ctx.app.inject({ method: 'GET', url: '/api/v1/public/users', headers: bearer(key.rawKey) });
      const limited = await ctx.app.inject({
        method: 'GET',
        url: '/api/v1/public/users',
        headers: bearer(key.rawKey),
      });
      assert.equal(limited.statusCode, 429);

      await ctx.db
        .updateTable('accounts')
        .set({ rate_limit_per_hour: 10 })
        .where('id', '=', accountId)
        .execute();
      const raised = await ctx.app.inject({
        method: 'GET',
        url: '/api/v1/public/users',
        headers: bearer(key.rawKey),
      });
      assert.equal(raised.statusCode, 200);
      assert.equal(raised.headers['x-ratelimit-limit'], '10');
      // The two 429s were not counted: 2 + this one = 3 of 10.
      assert.equal(raised.headers['x-ratelimit-remaining'], '7');
    });

    test('last use is recorded without a write per request', async () => {
      const accountId = await seedAccount(ctx.db);
      const key = await seedKey(ctx.db, accountId);
      await ctx.app.inject({ method: 'GET', url: '/api/v1/public/users', headers: bearer(key.rawKey) });
      const unflushed = await ctx.db
        .selectFrom('api_keys')
        .select('last_used_at')
        .where('id', '=', key.id)
        .executeTakeFirstOrThrow();
      assert.equal(unflushed.last_used_at, null);
      await ctx.runtime.lastUse.flush();
      const flushed = await ctx.db
        .selectFrom('api_keys')
        .select('last_used_at')
        .where('id', '=', key.id)
        .executeTakeFirstOrThrow();
      assert.ok(flushed.last_used_at !== null && Date.now() - Date.parse(flushed.last_used_at) < 60_000);
    });
  });
}
