import assert from 'node:assert/strict';
import { once } from 'node:events';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { KEY_ROW_MAX_AGE_MS } from '../../src/auth/key-lookup.ts';
import { OAUTH_PATH } from '../../src/paths.ts';
import { type OwnRedis, startRedis } from '../faults/harness.ts';
import { account, ndjson } from '../import/files.ts';
import {
  bearer,
  createTestContext,
  runCli,
  STORES,
  seedAccount,
  seedKey,
  type TestContext,
} from '../helpers.ts';

/**
 * The CLI on PostgreSQL whose Redis is gone (the primary killed, as in a chaos soak): a command that
 * changed the database cannot tell the servers, yet its change is committed. It prints its result
 * as always (a new key or secret is shown this once), then one warning on standard error, and exits
 * 0. A command whose own work fails still fails.
 */

/** The one line a change that could not be told ends with; nothing else is on standard error. */
const WARNING = new RegExp(
  '^safety-api: warning: the change is saved, but the servers could not be told \\(Redis is not answering\\): ' +
    `servers that cannot reach Redis either see it now \\(they read the database at every request\\), ` +
    `the others within ${KEY_ROW_MAX_AGE_MS / 1000} s, or at their next request after "safety-api cache bump"\\n$`,
);

if (STORES.includes('postgres')) {
  describe('CLI changes while Redis is gone (PostgreSQL)', () => {
    let redis: OwnRedis;
    let ctx: TestContext;
    let env: Record<string, string>;
    let accountId: string;

    before(async () => {
      redis = await startRedis();
      // The server counts in the same Redis, as in production; it reads PostgreSQL once Redis is gone.
      ctx = await createTestContext('postgres', { REDIS_URL: redis.url });
      accountId = await seedAccount(ctx.db);
      env = { DATABASE_URL: ctx.databaseUrl, REDIS_URL: redis.url };
      const exited = once(redis.process, 'exit');
      redis.process.kill('SIGKILL');
      await exited;
    });
    after(async () => {
      await ctx?.close();
      await redis?.stop();
    });

    const status = async (rawKey: string) =>
      (await ctx.app.inject({ url: '/api/v1/public/incidents', headers: bearer(rawKey) })).statusCode;

    test('keys create --json prints the new key, then the warning, and exits 0; the key works', async () => {
      const created = await runCli(['keys', 'create', '--account', accountId, '--name', 'BI', '--json'], env);
      assert.equal(created.code, 0, created.stderr);
      assert.match(created.stderr, WARNING);
      const lines = created.stdout.split('\n');
      assert.equal(lines.length, 2, 'one JSON line');
      const key = JSON.parse(lines[0] as string);
      assert.match(key.key, /^svc_[0-9a-f]{40}$/);
      assert.equal(key.state, 'active');
      assert.equal(await status(key.key), 200);
    });

    test('keys create without --json prints the key line before the warning', async () => {
      const created = await runCli(['keys', 'create', '--account', accountId, '--name', 'Sheets'], env);
      assert.equal(created.code, 0, created.stderr);
      assert.match(created.stderr, WARNING);
      const rawKey = /^API key \(shown once, store it now\): (svc_[0-9a-f]{40})$/m.exec(created.stdout)?.[1];
      assert.ok(rawKey !== undefined, created.stdout);
      assert.equal(await status(rawKey), 200);
    });

    test('keys roll --json prints the successor and exits 0; both keys work during the overlap', async () => {
      const old = await seedKey(ctx.db, accountId);
      assert.equal(await status(old.rawKey), 200);
      const rolled = await runCli(['keys', 'roll', old.id, '--overlap', '1h', '--json'], env);
      assert.equal(rolled.code, 0, rolled.stderr);
      assert.match(rolled.stderr, WARNING);
      const successor = JSON.parse(rolled.stdout);
      assert.match(successor.key, /^svc_[0-9a-f]{40}$/);
      assert.equal(successor.previous_id, old.id);
      assert.equal(successor.rolled_from, old.id);
      assert.ok(Date.parse(successor.previous_expires_at) > Date.now());
      assert.equal(await status(successor.key), 200);
      assert.equal(await status(old.rawKey), 200);
    });

    test('oauth-clients create --json prints the client secret and exits 0; the secret is accepted', async () => {
      const created = await runCli(
        [
          'oauth-clients',
          'create',
          '--account',
          accountId,
          '--name',
          'Partner',
          '--redirect-uri',
          'https://partner.example/cb',
          '--json',
        ],
        env,
      );
      assert.equal(created.code, 0, created.stderr);
      assert.match(created.stderr, WARNING);
      const client = JSON.parse(created.stdout);
      assert.match(client.client_secret, /^ocs_[0-9a-f]{64}$/);
      const token = await ctx.app.inject({
        method: 'POST',
        url: `${OAUTH_PATH}/token`,
        headers: {
          authorization: `Basic ${Buffer.from(`${client.client_id}:${client.client_secret}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        payload: 'grant_type=client_credentials&scope=users%3Aread',
      });
      assert.equal(token.statusCode, 200, token.body);
    });

    test('an import (written by a worker thread) reports its counts, then the warning, and exits 0', async () => {
      const imported = await runCli(['import', ndjson([account(randomUUID())])], env);
      assert.equal(imported.code, 0, imported.stderr);
      assert.match(imported.stdout, /^Imported 1 accounts, /);
      assert.match(imported.stderr, WARNING);
    });

    test('a command whose own work fails exits non-zero with its one-line error, and no warning', async () => {
      const key = await seedKey(ctx.db, accountId);
      assert.equal((await runCli(['keys', 'revoke', key.id], env)).code, 0);
      const again = await runCli(['keys', 'enable', key.id], env);
      assert.equal(again.code, 2);
      assert.equal(again.stdout, '');
      assert.equal(again.stderr, 'safety-api: a revoked key cannot be enabled: create a new key\n');
    });

    test('"cache bump", whose work is the bump, fails with one line', async () => {
      const bump = await runCli(['cache', 'bump'], env);
      assert.equal(bump.code, 1);
      assert.equal(bump.stdout, '');
      assert.equal(bump.stderr, 'safety-api: could not bump the generation: Redis is not answering\n');
    });

    test('a list changes nothing and so has nothing to warn about', async () => {
      const list = await runCli(['keys', 'list', '--account', accountId, '--json'], env);
      assert.equal(list.code, 0, list.stderr);
      assert.equal(list.stderr, '');
      assert.ok(JSON.parse(list.stdout).length > 0);
    });
  });
}
