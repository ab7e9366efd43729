import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import * as oidc from 'openid-client';
import { Webhook } from 'standardwebhooks';
import type { StoreName } from '../../src/db/database.ts';
import { openDatabase } from '../../src/db/database.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import { storeCopyRepository } from '../../src/db/repositories/store-copy.ts';
import { OAUTH_PATH } from '../../src/paths.ts';
import { MIGRATION_TABLES } from '../../src/db/repositories/migration-state.ts';
import { checksumTables, TABLE_PLAN } from '../../src/services/store-copy.ts';
import {
  createTestDatabase,
  ROOT,
  runCli,
  STORES,
  seedAccount,
  seedManyIncidents,
  type TestDatabase,
} from '../helpers.ts';
import {
  authorizationRequest,
  Browser,
  discover,
  type OauthServer,
  PASSWORD,
  seedClient,
  seedUser,
  signInAndConsent,
  startOauthServer,
} from '../oauth/harness.ts';
import { importRecords, incident } from '../webhooks/feed.ts';
import { type Received, Receiver } from '../webhooks/receiver.ts';
import {
  type Answer,
  answers,
  appOn,
  importWhile,
  type Populated,
  populate,
  requestsOf,
  totalOf,
} from './store-fixtures.ts';
import { until } from '../wait.ts';

const ENV = { WEBHOOKS_ALLOW_PRIVATE: 'true', WEBHOOK_TIMEOUT_MS: '2000' };
const IMPORT_BATCH = 40;

describe('copy-store: the tables it copies', () => {
  for (const store of STORES) {
    test(`every table of the migrated schema is copied or explicitly excluded (${store})`, async () => {
      const database = await createTestDatabase(store);
      const handle = openDatabase(database.url);
      try {
        await migrateToLatest(handle.db);
        const tables = (await storeCopyRepository.tables(handle.db)).filter(
          (t) => !MIGRATION_TABLES.includes(t),
        );
        assert.deepEqual(tables.sort(), Object.keys(TABLE_PLAN).sort());
        assert.ok(typeof TABLE_PLAN.admin_sessions === 'object', 'admin sessions are excluded');
      } finally {
        await handle.destroy();
        await database.drop();
      }
    });
  }

  test('a table neither copied nor excluded stops the copy before anything is written', async () => {
    const store = STORES[0] as StoreName;
    const [from, to] = [await createTestDatabase(store), await createTestDatabase(store)];
    const handle = openDatabase(from.url);
    try {
      await migrateToLatest(handle.db);
      await seedAccount(handle.db);
      await handle.db.schema
        .createTable('brand_new')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .execute();
      const run = await runCli(['copy-store', '--from', from.url, '--to', to.url], {});
      assert.equal(run.code, 1);
      assert.match(run.stderr, /^safety-api: table brand_new is neither copied nor excluded by copy-store/);
      assert.deepEqual(await checksumTables(to.url), {}, 'the target was not even migrated');
    } finally {
      await handle.destroy();
      await from.drop();
      await to.drop();
    }
  });
});

const DIRECTIONS = (
  [
    ['sqlite', 'postgres'],
    ['postgres', 'sqlite'],
  ] as [StoreName, StoreName][]
).filter(([from, to]) => STORES.includes(from) && STORES.includes(to));

for (const [fromStore, toStore] of DIRECTIONS) {
  describe(`copy-store ${fromStore} → ${toStore}`, () => {
    let server: OauthServer;
    let populated: Populated;
    let refreshToken: string;
    let client: { clientId: string; clientSecret: string | null };
    let receiver: Receiver;
    let secret: string;
    let endpointId: string;
    let undelivered: string[];
    let sourceAnswers: Answer[];
    let target: TestDatabase;
    let copied: { code: number; stdout: string; stderr: string };
    let busyBatches: number;

    const requests = () => requestsOf(populated);

    before(async () => {
      server = await startOauthServer(fromStore, ENV);
      const ctx = server.ctx;
      populated = await populate(ctx);
      const [a] = populated.steady as [string];
      // A big steady account, so that a copy takes long enough to be stopped half-way.
      const big = await seedAccount(ctx.db, { name: 'Big' });
      await seedManyIncidents(ctx.databaseUrl, big, 20_000);

      // An OAuth grant with a refresh token, through the real sign-in and consent pages.
      const user = await seedUser(ctx.db, a, { role: 'admin' });
      client = await seedClient(ctx.db, a);
      const config = await discover(server, client.clientId, client.clientSecret);
      const state = oidc.randomState();
      const { url, verifier } = await authorizationRequest(config, { scope: 'openid incidents:read', state });
      const callback = await signInAndConsent(new Browser(server.baseUrl), url, {
        email: user.email,
        password: PASSWORD,
      });
      const tokens = await oidc.authorizationCodeGrant(config, callback, {
        pkceCodeVerifier: verifier,
        expectedState: state,
      });
      refreshToken = tokens.refresh_token as string;

      // A webhook endpoint mid-stream: three events delivered (and their position committed), four waiting.
      receiver = await Receiver.start();
      await ctx.runtime.delivery.start();
      const created = await ctx.runtime.services.webhooks.create({
        accountId: a,
        url: receiver.url(),
        events: 'incident.*',
        actor: 'test',
      });
      secret = created.secret;
      endpointId = created.endpoint.id;
      await importRecords(
        ctx,
        [1, 2, 3].map((i) => incident(a, randomUUID(), 1000 + i)),
      );
      await receiver.waitFor(3, 30_000);
      await until(
        async () => (await ctx.runtime.services.webhooks.show(created.endpoint.id)).lag === 0,
        30_000,
        'the position',
      );
      await ctx.runtime.delivery.stop();
      undelivered = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
      await importRecords(
        ctx,
        undelivered.map((id, i) => incident(a, id, 2000 + i)),
      );

      sourceAnswers = await answers(ctx.app, requests());
      target = await createTestDatabase(toStore);
      // Imports keep going into the source while it is copied.
      const imports = importWhile(ctx, populated.busy, IMPORT_BATCH);
      copied = await runCli(['copy-store', '--from', ctx.databaseUrl, '--to', target.url], {});
      busyBatches = await imports.stop();
    });
    after(async () => {
      await receiver?.close();
      await target?.drop();
      await server?.close();
    });

    test('counts and checksums match the snapshot, table by table, and are printed', () => {
      assert.equal(copied.code, 0, copied.stderr);
      assert.equal(copied.stderr, '');
      const copiedTables = Object.entries(TABLE_PLAN).filter(([, plan]) => plan === 'copy');
      for (const [table] of copiedTables)
        assert.match(
          copied.stdout,
          new RegExp(`\\n  ${table} +[\\d,]+ [0-9a-f]{32} \\| +[\\d,]+ [0-9a-f]{32}  ok\\n`),
        );
      assert.doesNotMatch(copied.stdout, /MISMATCH|admin_sessions/);
      assert.match(copied.stdout, /Copied incidents: [\d,]+ rows/);
      assert.ok(busyBatches > 0, 'imports ran into the source during the copy');
    });

    test('the target answers page by page what the source answered, with the same ETags; keys keep their states', async () => {
      const opened = await appOn(target.url, { ...ENV, BASE_URL: server.baseUrl });
      try {
        const targetAnswers = await answers(opened.app, requests());
        for (const [i, request] of requests().entries())
          assert.deepEqual(
            targetAnswers[i],
            sourceAnswers[i],
            `${request.url} answers as before: ${difference(targetAnswers[i], sourceAnswers[i])}`,
          );
        assert.deepEqual(
          sourceAnswers.slice(-5).map((answer) => answer.status),
          [401, 401, 401, 200, 200],
          'disabled, revoked and expired keys stay refused; both keys of the roll work',
        );
        // The busy account holds whole imports only: the snapshot was taken between two commits.
        const busy = await totalOf(opened.app, populated.keys.busy);
        assert.equal(busy % IMPORT_BATCH, 0, `${busy} incidents: not a whole number of imports`);
        assert.ok(busy <= busyBatches * IMPORT_BATCH);
      } finally {
        await opened.close();
      }
    });

    test('a refresh token issued by the source works on the target', async () => {
      const opened = await appOn(target.url, { ...ENV, BASE_URL: server.baseUrl });
      try {
        const res = await opened.app.inject({
          method: 'POST',
          url: `${OAUTH_PATH}/token`,
          headers: {
            'content-type': 'application/x-www-form-urlencoded',
            authorization: `Basic ${Buffer.from(`${client.clientId}:${client.clientSecret}`).toString('base64')}`,
          },
          payload: new URLSearchParams({
            grant_type: 'refresh_token',
            refresh_token: refreshToken,
          }).toString(),
        });
        assert.equal(res.statusCode, 200, res.body);
        const { access_token: accessToken } = res.json();
        const listed = await opened.app.inject({
          url: '/api/v1/incidents',
          headers: { authorization: `Bearer ${accessToken}` },
        });
        assert.equal(listed.statusCode, 200, listed.body);
      } finally {
        await opened.close();
      }
    });

    test('the webhook endpoint resumes at its position, signing with the same secret', async () => {
      const opened = await appOn(target.url, { ...ENV, BASE_URL: server.baseUrl });
      try {
        // Its delivery log came along, requests and answers included.
        const log = (await opened.runtime.services.webhooks.show(endpointId)).attempts;
        assert.deepEqual(
          log.map((attempt) => [attempt.request?.body, attempt.response?.status]).reverse(),
          receiver.received.slice(0, 3).map((received) => [received.body, 204]),
        );
        await opened.runtime.delivery.start();
        await receiver.waitFor(7, 30_000);
        const resumed = receiver.received.slice(3, 7);
        assert.deepEqual(
          resumed.map((r) => r.json.data.id),
          undelivered,
          'the four waiting events, in order, none delivered twice',
        );
        for (const received of resumed) assert.deepEqual(verify(secret, received), received.json);
      } finally {
        await opened.close();
      }
    });

    test('a target holding data is refused in one line and left as it was', async () => {
      const sums = await checksumTables(target.url);
      const run = await runCli(['copy-store', '--from', server.ctx.databaseUrl, '--to', target.url], {});
      assert.equal(run.code, 2);
      assert.match(
        run.stderr,
        /^safety-api: the target is not empty \(.*\): copy-store writes only into an empty store; nothing was written \(--replace empties it first\)\n$/,
      );
      assert.deepEqual(await checksumTables(target.url), sums);
      const same = await runCli(
        ['copy-store', '--from', server.ctx.databaseUrl, '--to', server.ctx.databaseUrl, '--replace'],
        {},
      );
      assert.equal(same.code, 2);
      assert.equal(same.stderr, 'safety-api: --from and --to are the same database: nothing was written\n');
    });

    test('a copy killed half-way leaves no copied row; the next run copies; --replace empties a used target', async () => {
      const killed = await createTestDatabase(toStore);
      try {
        const child = spawn(
          process.execPath,
          [
            join(ROOT, 'bin/safety-api.js'),
            'copy-store',
            '--from',
            server.ctx.databaseUrl,
            '--to',
            killed.url,
          ],
          { cwd: ROOT, env: { ...process.env, LOG_LEVEL: 'silent' } },
        );
        let stdout = '';
        child.stdout.on('data', (chunk) => {
          stdout += chunk;
          // The users are in; 20,000 incidents, the index builds and the read-back are still to come.
          if (stdout.includes('Copied users:')) child.kill('SIGKILL');
        });
        const [code, signal] = await once(child, 'exit');
        assert.equal(signal, 'SIGKILL', `the copy ended on its own (${code}): ${stdout}`);
        assert.doesNotMatch(stdout, /Verified/);
        const left = await checksumTables(killed.url);
        for (const [table, { rows }] of Object.entries(left)) assert.equal(rows, 0, `${table} holds no row`);

        const again = await runCli(['copy-store', '--from', server.ctx.databaseUrl, '--to', killed.url], {});
        assert.equal(again.code, 0, again.stderr);

        // A used target: only with --replace, and then it holds the source's data alone.
        const handle = openDatabase(killed.url);
        const stranger = await seedAccount(handle.db, { name: 'Stranger' });
        await handle.destroy();
        const refused = await runCli(
          ['copy-store', '--from', server.ctx.databaseUrl, '--to', killed.url],
          {},
        );
        assert.equal(refused.code, 2);
        const replaced = await runCli(
          ['copy-store', '--from', server.ctx.databaseUrl, '--to', killed.url, '--replace'],
          {},
        );
        assert.equal(replaced.code, 0, replaced.stderr);
        assert.doesNotMatch(replaced.stdout, /MISMATCH/);
        const check = openDatabase(killed.url);
        try {
          const found = await check.db
            .selectFrom('accounts')
            .select('id')
            .where('id', '=', stranger)
            .execute();
          assert.deepEqual(found, [], 'the target held data the source does not have: it is gone');
        } finally {
          await check.destroy();
        }
      } finally {
        await killed.drop();
      }
    });
  });
}

function verify(key: string, received: Received): unknown {
  return new Webhook(key).verify(received.body, {
    'webhook-id': String(received.headers['webhook-id']),
    'webhook-timestamp': String(received.headers['webhook-timestamp']),
    'webhook-signature': String(received.headers['webhook-signature']),
  });
}

/** Where two answers first differ, for the failure message. */
function difference(actual: Answer | undefined, expected: Answer | undefined): string {
  const [a, b] = [JSON.stringify(actual), JSON.stringify(expected)];
  let i = 0;
  while (i < a.length && a[i] === b[i]) i += 1;
  return `at ${i}: ${a.slice(Math.max(0, i - 80), i + 80)} vs ${b.slice(Math.max(0, i - 80), i + 80)}`;
}
