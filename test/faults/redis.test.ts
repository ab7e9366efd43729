import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { StoreName } from '../../src/db/database.ts';
import { REDIS_COMMAND_TIMEOUT_MS } from '../../src/redis.ts';
import { bearer, STORES, seedAccount, seedKey } from '../helpers.ts';
import { blockAfterNextWriteTo, cpuWaitMs, watchGarbageCollection } from './busy-loop.ts';
import { createFaultContext, type FaultContext, type OwnRedis, startRedis, timed } from './harness.ts';
import { sleep } from '../wait.ts';

// Redis is store-independent: one store is enough to prove the fallback.
const store = STORES[0] ?? 'sqlite';

/** Generous bound for a request while Redis is frozen or gone: the command timeout is 200 ms. */
const MAX_MS = 500;
/** The allowance of the keys `startRedisAndApp` makes. */
const ALLOWANCE = 100_000;
/** How many requests are sent at once while Redis is frozen. */
const AT_ONCE = 20;

/**
 * A Redis of the test's own, the application on store `on` counting in it, and a key of an account
 * allowed ALLOWANCE requests an hour per key. Redis is stopped again if the application does not
 * start.
 */
async function startRedisAndApp(on: StoreName) {
  const redis = await startRedis();
  try {
    const ctx = await createFaultContext(on, { REDIS_URL: redis.url });
    const accountId = await seedAccount(ctx.db, { rate_limit_per_hour: ALLOWANCE });
    return { redis, ctx, accountId, key: await seedKey(ctx.db, accountId) };
  } catch (error) {
    await redis.stop();
    throw error;
  }
}

/** GET /departments with `rawKey`, and any further headers. */
function departments(ctx: FaultContext, rawKey: string, headers: Record<string, string> = {}) {
  return ctx.app.inject({
    method: 'GET',
    url: '/api/v1/public/departments',
    headers: { ...bearer(rawKey), ...headers },
  });
}

describe(`public rate limiter with Redis frozen or killed (${store})`, () => {
  let redis: OwnRedis;
  let ctx: FaultContext;
  let accountId: string;
  let rawKey: string;
  let keyId: string;

  before(async () => {
    ({
      redis,
      ctx,
      accountId,
      key: { rawKey, id: keyId },
    } = await startRedisAndApp(store));
  });
  after(async () => {
    await ctx?.close();
    await redis?.stop();
  });

  const get = () => departments(ctx, rawKey);
  let etag = '';
  /** A 304 is counted and then refunded: more Redis commands than a 200, under the same bound. */
  const conditionalGet = () => departments(ctx, rawKey, { 'if-none-match': etag });

  async function fallbackCount(): Promise<number> {
    const metrics = await ctx.app.inject({ method: 'GET', url: '/metrics' });
    const line = /^rate_limiter_fallback_total (\d+)$/m.exec(metrics.body);
    assert.ok(line, 'the fallback counter is exported');
    return Number(line[1]);
  }

  /** The count of `id` (the describe's key unless said) in Redis. */
  async function countInRedis(id = keyId): Promise<number> {
    const client = redis.inspect();
    const keys = await client.keys(`*${id}*`);
    const values = await Promise.all(keys.map((k) => client.get(k)));
    client.disconnect();
    return values.reduce((sum, v) => sum + Number(v ?? 0), 0);
  }

  /** Requests for about `ms`, a few at a time: each must be 200 (or 304 when asked) and quick. */
  async function requestsFor(ms: number): Promise<number> {
    if (etag === '') etag = String((await get()).headers.etag);
    const until = Date.now() + ms;
    let answered = 0;
    while (Date.now() < until && answered < 200) {
      const batch = await Promise.all([
        timed(get).then((answer) => ({ ...answer, expected: 200 })),
        timed(get).then((answer) => ({ ...answer, expected: 200 })),
        timed(conditionalGet).then((answer) => ({ ...answer, expected: 304 })),
      ]);
      for (const { result, ms: took, expected } of batch) {
        assert.equal(result.statusCode, expected);
        assert.ok(took < MAX_MS, `${expected} answered in ${Math.round(took)} ms`);
        answered += 1;
      }
    }
    return answered;
  }

  test('Redis healthy, the event loop busy for two deadlines between the count and its reply: counted in Redis', async () => {
    const key = await seedKey(ctx.db, accountId);
    const getWith = () => departments(ctx, key.rawKey);
    // A first request, so that on PostgreSQL the key row is remembered and the count is the only
    // Redis command of the next one.
    assert.equal((await getWith()).statusCode, 200);
    const [fallbackBefore, countBefore] = [await fallbackCount(), await countInRedis(key.id)];
    assert.equal(countBefore, 1);

    const blocked = blockAfterNextWriteTo(redis.port, 2 * REDIS_COMMAND_TIMEOUT_MS);
    const answer = await getWith();
    assert.ok((await blocked) >= 2 * REDIS_COMMAND_TIMEOUT_MS, 'the loop was held past the deadline');
    assert.equal(answer.statusCode, 200);
    assert.equal(await countInRedis(key.id), countBefore + 1, 'counted in Redis');
    assert.equal(
      answer.headers['x-ratelimit-remaining'],
      String(ALLOWANCE - countBefore - 1),
      'what is left as Redis counts it',
    );
    assert.equal(await fallbackCount(), fallbackBefore, 'not counted in memory');
  });

  test('frozen (SIGSTOP) for ~3 s: every request 200 within ~0.5 s, counted in memory; then Redis again', async () => {
    assert.equal((await get()).statusCode, 200);
    assert.equal(await countInRedis(), 1, 'while Redis answers, requests are counted there');
    const fallbackBefore = await fallbackCount();

    redis.process.kill('SIGSTOP');
    let answered: number;
    try {
      answered = await requestsFor(3000);
    } finally {
      redis.process.kill('SIGCONT');
    }
    assert.ok(answered >= 6, `${answered} requests answered during the freeze`);
    assert.ok((await fallbackCount()) - fallbackBefore >= answered, 'each was counted by the fallback');

    // Back: a request is counted in Redis again and no longer by the fallback (bounded wait).
    let backInRedis = false;
    for (let attempt = 0; attempt < 50 && !backInRedis; attempt += 1) {
      const [fallback, counted] = [await fallbackCount(), await countInRedis()];
      assert.equal((await get()).statusCode, 200);
      backInRedis = (await fallbackCount()) === fallback && (await countInRedis()) > counted;
      if (!backInRedis) await sleep(100);
    }
    assert.ok(backInRedis, 'counts go to Redis again after SIGCONT');
  });

  test('killed (SIGKILL): every request 200 within ~0.5 s, counted in memory', async () => {
    const fallbackBefore = await fallbackCount();
    const exited = new Promise((resolve) => redis.process.once('exit', resolve));
    redis.process.kill('SIGKILL');
    await exited;
    const answered = await requestsFor(1500);
    assert.ok(answered >= 6, `${answered} requests answered with Redis gone`);
    assert.ok((await fallbackCount()) - fallbackBefore >= answered);
  });
});

/**
 * With PostgreSQL, a request may ask Redis twice on two connections: its count, which reads the
 * shared generation, and then, if that count did not confirm the remembered key row, the
 * generation itself before the row is read again. Redis frozen, the first must spare the second
 * its timeout.
 */
if (STORES.includes('postgres')) {
  describe('PostgreSQL with Redis frozen: no request waits for two command timeouts', () => {
    let redis: OwnRedis;
    let ctx: FaultContext;
    let rawKey: string;

    before(async () => {
      ({
        redis,
        ctx,
        key: { rawKey },
      } = await startRedisAndApp('postgres'));
    });
    after(async () => {
      await ctx?.close();
      await redis?.stop();
    });

    test('one request at a time for ~2.5 s: each 200 in less than two timeouts, some having met one', async () => {
      const get = () => departments(ctx, rawKey);
      // The key row is remembered, with the generation it was read under.
      for (let i = 0; i < 3; i += 1) assert.equal((await get()).statusCode, 200);

      const times: number[] = [];
      redis.process.kill('SIGSTOP');
      try {
        const until = Date.now() + 2500;
        while (Date.now() < until) {
          const { result, ms } = await timed(get);
          assert.equal(result.statusCode, 200);
          times.push(ms);
        }
      } finally {
        redis.process.kill('SIGCONT');
      }
      const slowest = Math.max(...times);
      assert.ok(
        slowest < 2 * REDIS_COMMAND_TIMEOUT_MS,
        `slowest answer ${Math.round(slowest)} ms of ${times.length}`,
      );
      assert.ok(
        slowest >= REDIS_COMMAND_TIMEOUT_MS,
        `a request met the frozen Redis (slowest ${Math.round(slowest)} ms)`,
      );
    });
  });
}

/**
 * Many requests at once: each has a key of its own, so that Redis is sent one count per request.
 * Last in the file: its thousands of requests leave garbage whose collection, in the same process,
 * would add to the answer times the tests above measure.
 */
describe(`public rate limiter with Redis frozen, ${AT_ONCE} requests at a time (${store})`, () => {
  let redis: OwnRedis;
  let ctx: FaultContext;
  let accountId: string;
  let rawKey: string;

  before(async () => {
    ({
      redis,
      ctx,
      accountId,
      key: { rawKey },
    } = await startRedisAndApp(store));
  });
  after(async () => {
    await ctx?.close();
    await redis?.stop();
  });

  test('rounds of requests at once for ~2.5 s: none waits for Redis twice', async () => {
    // One key each, so that a round sends Redis one count per request; every other conditional,
    // answered 304: counted, then refunded.
    const keys = await Promise.all(Array.from({ length: AT_ONCE }, () => seedKey(ctx.db, accountId)));
    const etag = String((await departments(ctx, rawKey)).headers.etag);
    const rounds: { from: number; to: number; slowest: number; cpuWait: number }[] = [];
    const collections = watchGarbageCollection();
    redis.process.kill('SIGSTOP');
    try {
      const until = Date.now() + 2500;
      while (Date.now() < until) {
        const [from, cpuWaitBefore] = [performance.now(), cpuWaitMs()];
        const round = await Promise.all(
          keys.map(async (key, i) => {
            const expected = i % 2 === 1 ? 304 : 200;
            const headers: Record<string, string> = expected === 304 ? { 'if-none-match': etag } : {};
            return { ...(await timed(() => departments(ctx, key.rawKey, headers))), expected };
          }),
        );
        const [to, cpuWait] = [performance.now(), cpuWaitMs() - cpuWaitBefore];
        for (const { result, expected } of round) assert.equal(result.statusCode, expected);
        rounds.push({ from, to, slowest: Math.max(...round.map((answer) => answer.ms)), cpuWait });
      }
    } finally {
      redis.process.kill('SIGCONT');
      await collections.stop();
    }
    // Per round, the slowest answer less the time the process waited for a CPU or paused to
    // collect garbage meanwhile: what Redis and the requests' own work cost it, whatever else the
    // machine runs. Two deadlines in a row take at least twice the deadline; one deadline and the
    // work of AT_ONCE requests take well under it.
    const worst = Math.max(
      ...rounds.map((round) => round.slowest - round.cpuWait - collections.pausedMs(round.from, round.to)),
    );
    assert.ok(
      worst < 2 * REDIS_COMMAND_TIMEOUT_MS,
      `slowest answer ${Math.round(worst)} ms (less CPU waits and collections): a request waited for Redis twice`,
    );
    const slowest = Math.max(...rounds.map((round) => round.slowest));
    assert.ok(
      slowest >= REDIS_COMMAND_TIMEOUT_MS,
      `a request met the frozen Redis (slowest ${Math.round(slowest)} ms)`,
    );
  });
});
