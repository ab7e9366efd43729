import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { buildApp } from '../../../src/app.ts';
import { loadConfig } from '../../../src/config.ts';
import type { Database } from '../../../src/db/schema.ts';
import { OAUTH_PATH } from '../../../src/paths.ts';
import { openRuntime, type Runtime } from '../../../src/runtime.ts';
import {
  bearer,
  createTestContext,
  REDIS_URL,
  STORES,
  seedAccount,
  seedKey,
  type TestContext,
} from '../../helpers.ts';
import { seedClient } from '../../oauth/harness.ts';

/**
 * The wider API's plan gate and hourly allowance (DESIGN "Wider API"): checked after the token,
 * in the order plan → scope → rate limit, counted per OAuth client like the public API counts per key.
 */

const BASE_URL = 'http://127.0.0.1:9';

/** A client-credentials token from the real token endpoint, without a listening socket. */
async function clientToken(
  app: FastifyInstance,
  client: { clientId: string; clientSecret: string | null },
  scope: string,
): Promise<string> {
  const basic = Buffer.from(`${client.clientId}:${client.clientSecret}`).toString('base64');
  const res = await app.inject({
    method: 'POST',
    url: `${OAUTH_PATH}/token`,
    headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({ grant_type: 'client_credentials', scope }).toString(),
  });
  assert.equal(res.statusCode, 200, res.body);
  return res.json().access_token;
}

function setPlan(
  db: Kysely<Database>,
  accountId: string,
  plan: Partial<{ api_access: number; rate_limit_per_hour: number }>,
) {
  return db.updateTable('accounts').set(plan).where('id', '=', accountId).execute();
}

for (const store of STORES) {
  describe(`wider API plan gate and rate limit (${store})`, () => {
    let ctx: TestContext;

    before(async () => {
      ctx = await createTestContext(store, { BASE_URL });
    });
    after(() => ctx.close());

    const get = (path: string, token: string) =>
      ctx.app.inject({
        method: 'GET',
        url: `/api/v1/${path}`,
        headers: { authorization: `Bearer ${token}` },
      });

    test('every 200 carries the three X-RateLimit headers; over the allowance 429 with Retry-After and no Reset', async () => {
      const accountId = await seedAccount(ctx.db, { rate_limit_per_hour: 3 });
      const client = await seedClient(ctx.db, accountId);
      const token = await clientToken(ctx.app, client, 'users:read');

      // The window opens during the first request: its clock readings around that request bound
      // the Reset of every 200 in the window (a request that crosses a second boundary is fine).
      let opened: { before: number; after: number } | null = null;
      for (const remaining of [2, 1, 0]) {
        const before = Math.floor(Date.now() / 1000);
        const res = await get('users', token);
        opened ??= { before, after: Math.ceil(Date.now() / 1000) };
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers['x-ratelimit-limit'], '3');
        assert.equal(res.headers['x-ratelimit-remaining'], String(remaining));
        const reset = Number(res.headers['x-ratelimit-reset']);
        assert.ok(
          reset >= opened.before + 3600 && reset <= opened.after + 3600,
          `Reset is absolute Unix seconds, an hour after the window opened: ${reset} not in ${opened.before}..${opened.after} + 3600`,
        );
      }

      for (let i = 0; i < 2; i += 1) {
        const res = await get('users', token);
        assert.equal(res.statusCode, 429);
        const body = res.json();
        assert.deepEqual(Object.keys(body).sort(), ['error', 'message']);
        assert.equal(body.error, 'RATE_LIMIT_EXCEEDED');
        assert.match(body.message, /OAuth client/);
        const retryAfter = Number(res.headers['retry-after']);
        assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 3600, `${retryAfter}`);
        assert.equal(res.headers['x-ratelimit-limit'], '3');
        assert.equal(res.headers['x-ratelimit-remaining'], '0');
        assert.equal(res.headers['x-ratelimit-reset'], undefined);
      }
    });

    test('the count is per OAuth client, and never shares a counter with an API key', async () => {
      const accountId = await seedAccount(ctx.db, { rate_limit_per_hour: 2 });
      const first = await clientToken(ctx.app, await seedClient(ctx.db, accountId), 'users:read');
      const second = await clientToken(ctx.app, await seedClient(ctx.db, accountId), 'users:read');
      const key = await seedKey(ctx.db, accountId);

      assert.equal((await get('users', first)).statusCode, 200);
      assert.equal((await get('users', first)).statusCode, 200);
      assert.equal((await get('users', first)).statusCode, 429);

      const other = await get('users', second);
      assert.equal(other.statusCode, 200, 'another client of the account has its own count');
      assert.equal(other.headers['x-ratelimit-remaining'], '1');

      const publicRes = await ctx.app.inject({
        method: 'GET',
        url: '/api/v1/public/users',
        headers: bearer(key.rawKey),
      });
      assert.equal(publicRes.statusCode, 200);
      assert.equal(publicRes.headers['x-ratelimit-remaining'], '1', "the key's count is its own");
    });

    test('an account without api_access gets 403 FEATURE_NOT_AVAILABLE before the scope check, uncounted; a plan change applies at the next request', async () => {
      const accountId = await seedAccount(ctx.db, { rate_limit_per_hour: 50 });
      const client = await seedClient(ctx.db, accountId);
      const token = await clientToken(ctx.app, client, 'users:read');

      const first = await get('users', token);
      assert.equal(first.statusCode, 200);
      assert.equal(first.headers['x-ratelimit-remaining'], '49');

      await setPlan(ctx.db, accountId, { api_access: 0 });
      for (const path of ['users', 'incidents', 'departments']) {
        const res = await get(path, token);
        assert.equal(res.statusCode, 403, path);
        assert.deepEqual(res.json(), {
          error: 'FEATURE_NOT_AVAILABLE',
          message: "The account's plan does not include API access.",
        });
        assert.equal(res.headers['x-ratelimit-limit'], undefined, 'a refused request is not counted');
      }
      const invalid = await get('users', `${token}x`);
      assert.equal(invalid.statusCode, 401, 'the token check still comes first');

      await setPlan(ctx.db, accountId, { api_access: 1, rate_limit_per_hour: 10 });
      const again = await get('users', token);
      assert.equal(again.statusCode, 200);
      assert.equal(again.headers['x-ratelimit-limit'], '10', 'the new allowance applies at once');
      assert.equal(again.headers['x-ratelimit-remaining'], '8', 'the 403s were not counted');

      const noScope = await get('departments', token);
      assert.equal(noScope.statusCode, 403);
      assert.match(noScope.json().message, /departments:read/);
      assert.equal(noScope.headers['x-ratelimit-limit'], undefined, 'the scope check comes before the count');
    });
  });
}

describe('wider API rate limit shared through Redis by two instances', () => {
  const store = STORES.includes('postgres') ? 'postgres' : 'sqlite';
  let ctx: TestContext;
  let second: { app: FastifyInstance; runtime: Runtime };
  let clientId: string;

  before(async () => {
    ctx = await createTestContext(store, { BASE_URL, REDIS_URL });
    const config = loadConfig({ LOG_LEVEL: 'silent', BASE_URL, REDIS_URL, DATABASE_URL: ctx.databaseUrl });
    const runtime = await openRuntime(config, { warn: () => {}, error: () => {} });
    const app = await buildApp(config, runtime);
    await app.ready();
    second = { app, runtime };
  });
  after(async () => {
    await ctx.runtime.redis?.del(`safety-api:rl:oauth-client:${clientId}`);
    await second.app.close();
    await second.runtime.close();
    await ctx.close();
  });

  test('requests alternating between the instances draw on one count', async () => {
    assert.ok(ctx.runtime.redis !== null && second.runtime.redis !== null);
    const accountId = await seedAccount(ctx.db, { rate_limit_per_hour: 4 });
    const client = await seedClient(ctx.db, accountId);
    clientId = client.clientId;
    const token = await clientToken(ctx.app, client, 'users:read');
    const apps = [ctx.app, second.app];
    const statuses: number[] = [];
    const remaining: (string | undefined)[] = [];
    for (let i = 0; i < 6; i += 1) {
      const res = await (apps[i % 2] as FastifyInstance).inject({
        method: 'GET',
        url: '/api/v1/users',
        headers: { authorization: `Bearer ${token}` },
      });
      statuses.push(res.statusCode);
      remaining.push(res.headers['x-ratelimit-remaining'] as string | undefined);
    }
    assert.deepEqual(statuses, [200, 200, 200, 200, 429, 429]);
    assert.deepEqual(remaining, ['3', '2', '1', '0', '0', '0']);
  });
});
