import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { freePort } from './faults/harness.ts';
import { bearer, createTestContext, seedAccount, seedKey, type TestContext } from './helpers.ts';

describe('operational endpoints', () => {
  let ctx: TestContext;
  let rawKey: string;

  before(async () => {
    ctx = await createTestContext('sqlite');
    ({ rawKey } = await seedKey(ctx.db, await seedAccount(ctx.db)));
  });
  after(() => ctx.close());

  test('/metrics counts responses by route pattern and status, in Prometheus text', async () => {
    await ctx.app.inject({
      url: '/api/v1/public/incidents/00000000-0000-4000-8000-000000000000',
      headers: bearer(rawKey),
    });
    await ctx.app.inject({ url: '/api/v1/public/users' });
    const res = await ctx.app.inject({ url: '/metrics' });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^text\/plain/);
    assert.match(
      res.body,
      /http_requests_total\{method="GET",route="\/api\/v1\/public\/incidents\/:id",status_code="404"\} 1/,
    );
    assert.match(
      res.body,
      /http_requests_total\{method="GET",route="\/api\/v1\/public\/users",status_code="401"\} 1/,
    );
    assert.match(res.body, /http_request_duration_seconds_bucket/);
    assert.match(res.body, /process_resident_memory_bytes/);
  });

  test('/metrics keeps one series per method, route and status across repeated requests', async () => {
    const url = '/api/v1/public/departments';
    for (let i = 0; i < 3; i += 1) await ctx.app.inject({ url, headers: bearer(rawKey) });
    await ctx.app.inject({ url });
    await ctx.app.inject({ url: '/no/such/route' });
    await ctx.app.inject({ url: '/no/other/route' });
    const body = (await ctx.app.inject({ url: '/metrics' })).body;
    const route = 'route="/api/v1/public/departments"';
    assert.match(body, new RegExp(`http_requests_total\\{method="GET",${route},status_code="200"\\} 3\\n`));
    assert.match(body, new RegExp(`http_requests_total\\{method="GET",${route},status_code="401"\\} 1\\n`));
    assert.match(body, new RegExp(`http_request_duration_seconds_count\\{method="GET",${route}\\} 4\\n`));
    assert.match(body, /http_requests_total\{method="GET",route="unmatched",status_code="404"\} 2\n/);
  });
});

describe('/metrics on a listener of its own (METRICS_PORT)', () => {
  let ctx: TestContext;
  let rawKey: string;
  let metricsPort: number;
  let main: string;

  before(async () => {
    metricsPort = await freePort();
    ctx = await createTestContext('sqlite', { METRICS_PORT: String(metricsPort) });
    ({ rawKey } = await seedKey(ctx.db, await seedAccount(ctx.db)));
    await ctx.app.listen({ port: 0, host: '127.0.0.1' });
    main = `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`;
    await ctx.app.metricsListener?.listen({ port: metricsPort, host: ctx.config.metricsHost });
  });
  after(() => ctx.close());

  test('the main port answers /metrics with the 404 body; the metrics port serves it, on loopback', async () => {
    const hidden = await fetch(`${main}/metrics`);
    assert.equal(hidden.status, 404);
    assert.deepEqual(await hidden.json(), { error: true, message: 'Not found' });

    const counted = await fetch(`${main}/api/v1/public/departments`, { headers: bearer(rawKey) });
    assert.equal(counted.status, 200);
    await counted.arrayBuffer();

    assert.equal(ctx.config.metricsHost, '127.0.0.1');
    const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
    const body = await res.text();
    assert.match(
      body,
      /http_requests_total\{method="GET",route="\/api\/v1\/public\/departments",status_code="200"\} 1\n/,
    );
    assert.match(body, /http_requests_total\{method="GET",route="unmatched",status_code="404"\} 1\n/);
    assert.match(body, /# TYPE rate_limiter_fallback_total counter/);
    assert.doesNotMatch(body, /route="\/metrics"/, 'scrapes are not counted as API traffic');

    const other = await fetch(`http://127.0.0.1:${metricsPort}/api/v1/public/departments`);
    assert.equal(other.status, 404);
    assert.deepEqual(await other.json(), { error: true, message: 'Not found' });
  });

  test('without METRICS_PORT there is no separate listener', async () => {
    const plain = await createTestContext('sqlite');
    try {
      assert.equal(plain.app.metricsListener, null);
      assert.equal((await plain.app.inject({ url: '/metrics' })).statusCode, 200);
    } finally {
      await plain.close();
    }
  });
});
