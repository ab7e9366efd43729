import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import {
  createFaultContext,
  ownDatabaseName,
  type FaultContext,
  type OwnRedis,
  startRedis,
  terminateBackends,
  withAdminClient,
} from '../faults/harness.ts';
import { STORES } from '../helpers.ts';

/** Listens on a free port of the loopback interface; returns the base URL. */
async function listen(ctx: FaultContext): Promise<string> {
  await ctx.app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`;
}

async function probe(url: string): Promise<{ status: number; headers: Headers; body: unknown }> {
  const res = await fetch(url);
  return { status: res.status, headers: res.headers, body: await res.json() };
}

for (const store of STORES) {
  describe(`health probes (${store})`, () => {
    let ctx: FaultContext;
    let base: string;

    before(async () => {
      ctx = await createFaultContext(store);
      base = await listen(ctx);
    });
    after(() => ctx.close());

    test('/healthz: 200 JSON, not cached, no key needed, not rate limited', async () => {
      const res = await probe(`${base}/healthz`);
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { status: 'ok' });
      assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
      assert.equal(res.headers.get('cache-control'), 'no-store');
      assert.equal(res.headers.get('x-ratelimit-limit'), null);
    });

    test('/readyz: 200 while the database answers; Redis reported as not configured', async () => {
      for (let i = 0; i < 3; i += 1) {
        const res = await probe(`${base}/readyz`);
        assert.equal(res.status, 200);
        assert.deepEqual(res.body, { status: 'ready', database: 'up', redis: 'not configured' });
        assert.equal(res.headers.get('cache-control'), 'no-store');
        assert.equal(res.headers.get('x-ratelimit-limit'), null);
      }
    });
  });
}

describe('readiness and Redis', () => {
  let redis: OwnRedis;
  let ctx: FaultContext;
  let base: string;

  before(async () => {
    redis = await startRedis();
    ctx = await createFaultContext(STORES[0] ?? 'sqlite', { REDIS_URL: redis.url });
    base = await listen(ctx);
  });
  after(async () => {
    await ctx.close();
    await redis.stop();
  });

  test('Redis up: reported up; Redis frozen or gone: still ready (200), reported down', async () => {
    assert.deepEqual((await probe(`${base}/readyz`)).body, { status: 'ready', database: 'up', redis: 'up' });
    redis.process.kill('SIGSTOP');
    const frozen = await probe(`${base}/readyz`);
    assert.equal(frozen.status, 200);
    assert.deepEqual(frozen.body, { status: 'ready', database: 'up', redis: 'down' });
    await redis.stop();
    const res = await probe(`${base}/readyz`);
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { status: 'ready', database: 'up', redis: 'down' });
  });
});

if (STORES.includes('postgres')) {
  describe('readiness and a stopped PostgreSQL database', () => {
    let ctx: FaultContext;
    let base: string;
    let name: string;

    const allowConnections = (allow: boolean) =>
      withAdminClient((client) => client.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS ${allow}`));

    before(async () => {
      ctx = await createFaultContext('postgres');
      name = ownDatabaseName(ctx.databaseUrl);
      base = await listen(ctx);
    });
    after(async () => {
      await allowConnections(true);
      await ctx.close();
    });

    test('503 while the database refuses connections, 200 again once it is back; /healthz stays 200', async () => {
      assert.equal((await probe(`${base}/readyz`)).status, 200);
      await allowConnections(false);
      await terminateBackends(ctx.databaseUrl);

      const down = await probe(`${base}/readyz`);
      assert.equal(down.status, 503);
      assert.deepEqual(down.body, { status: 'unavailable', database: 'down', redis: 'not configured' });
      assert.equal(down.headers.get('cache-control'), 'no-store');
      assert.equal((await probe(`${base}/healthz`)).status, 200);

      await allowConnections(true);
      assert.equal((await probe(`${base}/readyz`)).status, 200);
    });
  });
}
