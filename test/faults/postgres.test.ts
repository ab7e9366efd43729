import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import * as oidc from 'openid-client';
import pg from 'pg';
import { INTEGRATIONS_PATH, OAUTH_PATH } from '../../src/paths.ts';
import { bearer, STORES, seedAccount, seedKey } from '../helpers.ts';
import { discover, seedClient } from '../oauth/harness.ts';
import { AdminClient, seedUser as seedAdmin } from '../routes/admin/admin-helpers.ts';
import {
  createFaultContext,
  databaseNameOf,
  eventually,
  type FaultContext,
  freePort,
  sleep,
  terminateBackends,
  timed,
  withAdminClient,
} from './harness.ts';

/** Generous bound for an answer while the database is stuck: the store deadline is ~2.5 s. */
const STUCK_MAX_MS = 3000;
const UNAVAILABLE = { error: true, message: 'Service temporarily unavailable' };

function assertUnavailable(res: { statusCode: number; headers: Record<string, unknown> }, what: string) {
  assert.equal(res.statusCode, 503, what);
  const retryAfter = Number(res.headers['retry-after']);
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `${what}: Retry-After`);
}

/** Once the store is back: exactly one warn line for the outage and one info line for the recovery. */
async function assertOneOutageLogged(ctx: FaultContext, linesBefore: number): Promise<void> {
  assert.ok(
    await eventually(async () => ctx.lines.slice(linesBefore).some((l) => l.level === 'info')),
    'the recovery is logged',
  );
  const outage = ctx.lines.slice(linesBefore);
  assert.deepEqual(
    outage.map((l) => l.level),
    ['warn', 'info'],
    `one line down, one line up: ${JSON.stringify(outage)}`,
  );
  assert.match(outage[0]?.message ?? '', /unavailable/);
  assert.match(outage[1]?.message ?? '', /available again/);
}

if (STORES.includes('postgres')) {
  describe('PostgreSQL connections killed while in use (pg_terminate_backend)', () => {
    let ctx: FaultContext;
    let rawKey: string;

    before(async () => {
      ctx = await createFaultContext('postgres');
      const accountId = await seedAccount(ctx.db, { rate_limit_per_hour: 100_000 });
      ({ rawKey } = await seedKey(ctx.db, accountId));
    });
    after(() => ctx?.close());

    const get = () =>
      ctx.app.inject({ method: 'GET', url: '/api/v1/public/departments', headers: bearer(rawKey) });

    test('20 concurrent requests, then every backend terminated, 5 times: the process lives on, answers are 200 or 503, then 200', async () => {
      for (let round = 0; round < 5; round += 1) {
        const inFlight = Array.from({ length: 20 }, get);
        await terminateBackends(ctx.databaseUrl);
        for (const res of await Promise.all(inFlight)) {
          if (res.statusCode !== 200) assertUnavailable(res, `round ${round}`);
        }
        assert.ok(
          await eventually(async () => (await get()).statusCode === 200),
          `round ${round}: 200 again`,
        );
      }
      const after = await Promise.all(Array.from({ length: 20 }, get));
      assert.deepEqual(
        after.map((r) => r.statusCode),
        Array(20).fill(200),
      );
    });
  });

  describe('PostgreSQL table locked by another session (~8 s)', () => {
    let ctx: FaultContext;
    let rawKey: string;

    before(async () => {
      ctx = await createFaultContext('postgres');
      const accountId = await seedAccount(ctx.db, { rate_limit_per_hour: 100_000 });
      ({ rawKey } = await seedKey(ctx.db, accountId));
    });
    after(() => ctx?.close());

    const get = () =>
      ctx.app.inject({ method: 'GET', url: '/api/v1/public/departments', headers: bearer(rawKey) });

    test('every request is answered within ~3 s with 503 + Retry-After; after release, 200 without restart', async () => {
      assert.equal((await get()).statusCode, 200);
      const linesBefore = ctx.lines.length;
      const lockUrl = ctx.databaseUrl;
      let release: () => void = () => {};
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      let locked: () => void = () => {};
      const isLocked = new Promise<void>((resolve) => {
        locked = resolve;
      });
      const holder = (async () => {
        const client = new pg.Client({ connectionString: lockUrl });
        await client.connect();
        try {
          await client.query('BEGIN');
          await client.query('LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE');
          locked();
          // Held until every request below is answered (about 8 s), at most 20 s.
          await Promise.race([released, sleep(20_000)]);
          await client.query('COMMIT');
        } finally {
          await client.end();
        }
      })();
      await isLocked;

      const answers: { res: LightMyRequestResponse; ms: number }[] = [];
      const until = Date.now() + 6000;
      const batches: Promise<void>[] = [];
      while (Date.now() < until) {
        batches.push(
          Promise.all(Array.from({ length: 5 }, () => timed(get))).then((batch) => {
            for (const { result, ms } of batch) answers.push({ res: result, ms });
          }),
        );
        await sleep(300);
      }
      await Promise.all(batches);
      release();
      await holder;

      assert.ok(answers.length >= 50, `${answers.length} requests answered`);
      for (const { res, ms } of answers) {
        assertUnavailable(res, 'while locked');
        assert.deepEqual(res.json(), UNAVAILABLE);
        assert.ok(ms < STUCK_MAX_MS, `answered in ${Math.round(ms)} ms`);
      }
      assert.ok(await eventually(async () => (await get()).statusCode === 200), '200 again after release');

      // `select 1` answers all along, but the outage lasts while requests fail: one line each way,
      // not a down and an up line per probe.
      await assertOneOutageLogged(ctx, linesBefore);
    });
  });

  describe('PostgreSQL database refusing connections', () => {
    let ctx: FaultContext;
    let baseUrl: string;
    let rawKey: string;
    let accessToken: string;
    let client: { clientId: string; clientSecret: string | null };
    let admin: AdminClient;

    before(async () => {
      const port = await freePort();
      baseUrl = `http://127.0.0.1:${port}`;
      ctx = await createFaultContext('postgres', { BASE_URL: baseUrl });
      await ctx.app.listen({ port, host: '127.0.0.1' });
      const accountId = await seedAccount(ctx.db, { rate_limit_per_hour: 100_000 });
      ({ rawKey } = await seedKey(ctx.db, accountId));
      client = await seedClient(ctx.db, accountId);
      const server = { ctx, baseUrl, issuer: new URL(`${baseUrl}${OAUTH_PATH}`), close: () => ctx.close() };
      const config = await discover(server, client.clientId, client.clientSecret);
      accessToken = (await oidc.clientCredentialsGrant(config, { scope: 'users:read' })).access_token;
      const person = await seedAdmin(ctx.db, accountId);
      admin = new AdminClient(ctx.app);
      assert.equal((await admin.signIn(person.email)).statusCode, 303);
    });
    after(async () => {
      await setAllowConnections(true);
      await ctx?.close();
    });

    async function setAllowConnections(allow: boolean): Promise<void> {
      const name = databaseNameOf(ctx.databaseUrl);
      assert.ok(name.startsWith('safety_test_'));
      await withAdminClient((c) => c.query(`ALTER DATABASE ${name} WITH ALLOW_CONNECTIONS ${allow}`));
    }

    const publicGet = () =>
      ctx.app.inject({ method: 'GET', url: '/api/v1/public/departments', headers: bearer(rawKey) });
    const widerGet = () =>
      ctx.app.inject({
        method: 'GET',
        url: '/api/v1/users',
        headers: { authorization: `Bearer ${accessToken}` },
      });
    const adminGet = () => admin.get(INTEGRATIONS_PATH);
    const tokenPost = async () => {
      const res = await fetch(`${baseUrl}${OAUTH_PATH}/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`${client.clientId}:${client.clientSecret}`).toString('base64')}`,
        },
        body: 'grant_type=client_credentials&scope=users%3Aread',
      });
      return { statusCode: res.status, headers: Object.fromEntries(res.headers), body: await res.text() };
    };

    test('503 + Retry-After on the public, wider, admin and OAuth surfaces; recovery without restart; one log line each way', async () => {
      assert.equal((await publicGet()).statusCode, 200);
      assert.equal((await widerGet()).statusCode, 200);
      assert.equal((await adminGet()).statusCode, 200);
      assert.equal((await tokenPost()).statusCode, 200);
      const linesBefore = ctx.lines.length;

      await setAllowConnections(false);
      try {
        await terminateBackends(ctx.databaseUrl);
        for (let round = 0; round < 3; round += 1) {
          const pub = await publicGet();
          assertUnavailable(pub, 'public API');
          assert.deepEqual(pub.json(), UNAVAILABLE);

          const wider = await widerGet();
          assertUnavailable(wider, 'wider API');
          assert.deepEqual(wider.json(), UNAVAILABLE);
          assert.equal(wider.headers['www-authenticate'], undefined, 'the token is not called invalid');

          const page = await adminGet();
          assertUnavailable(page, 'admin panel');
          assert.match(String(page.headers['content-type']), /text\/html/);
          assert.equal(page.headers['x-frame-options'], 'DENY', 'with the panel security headers');

          const token = await tokenPost();
          assertUnavailable(token, 'OAuth token endpoint');
          assert.deepEqual(JSON.parse(token.body), UNAVAILABLE);
        }
        // The outage outlives a few probes (about one a second).
        await sleep(2500);
      } finally {
        await setAllowConnections(true);
      }

      assert.ok(await eventually(async () => (await publicGet()).statusCode === 200), 'public 200 again');
      assert.equal((await widerGet()).statusCode, 200);
      assert.equal((await adminGet()).statusCode, 200);
      assert.equal((await tokenPost()).statusCode, 200);

      await assertOneOutageLogged(ctx, linesBefore);
    });
  });
}
