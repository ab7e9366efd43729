import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { bearer, createTestContext, runCli, STORES, seedAccount, type TestContext } from '../helpers.ts';

for (const store of STORES) {
  describe(`safety-api keys, against a running server (${store})`, () => {
    let ctx: TestContext;
    let accountId: string;
    let env: Record<string, string>;

    before(async () => {
      ctx = await createTestContext(store);
      accountId = await seedAccount(ctx.db);
      env = { DATABASE_URL: ctx.databaseUrl };
    });
    after(() => ctx.close());

    const status = async (rawKey: string, method: 'GET' | 'POST' = 'GET') => {
      const res = await ctx.app.inject({ method, url: '/api/v1/public/incidents', headers: bearer(rawKey) });
      return `${res.statusCode} ${res.json().error}`;
    };

    test('the whole lifecycle takes effect on the running server at its next request', async () => {
      const created = await runCli(
        ['keys', 'create', '--account', accountId, '--name', 'BI export', '--json'],
        env,
      );
      assert.equal(created.code, 0, created.stderr);
      const key = JSON.parse(created.stdout);
      assert.match(key.key, /^svc_[0-9a-f]{40}$/);
      assert.equal(key.prefix, key.key.slice(0, 12));
      assert.equal(key.scope, 'read');
      assert.equal(key.state, 'active');
      assert.equal(key.expires_at, null);
      assert.equal(await status(key.key), '200 false');

      // Only a hash is stored.
      const stored = await ctx.db
        .selectFrom('api_keys')
        .selectAll()
        .where('id', '=', key.id)
        .executeTakeFirstOrThrow();
      assert.notEqual(stored.key_hash, key.key);
      assert.match(stored.key_hash, /^[0-9a-f]{64}$/);
      assert.ok(!JSON.stringify(stored).includes(key.key));

      const listed = await runCli(['keys', 'list', '--account', accountId, '--json'], env);
      const [entry] = JSON.parse(listed.stdout);
      assert.equal(entry.id, key.id);
      assert.equal(entry.key, undefined, 'the raw key is never listed');
      assert.ok(!listed.stdout.includes(key.key));

      assert.equal((await runCli(['keys', 'disable', key.id], env)).code, 0);
      assert.equal(await status(key.key), '401 API_KEY_INVALID');
      assert.equal((await runCli(['keys', 'enable', key.id], env)).code, 0);
      assert.equal(await status(key.key), '200 false');

      assert.equal(await status(key.key, 'POST'), '403 INSUFFICIENT_SCOPE');
      assert.equal((await runCli(['keys', 'scope', key.id, 'read-write'], env)).code, 0);
      assert.equal(await status(key.key, 'POST'), '405 true');

      const renamed = await runCli(['keys', 'rename', key.id, 'Warehouse BI'], env);
      assert.equal(renamed.code, 0);
      assert.match(renamed.stdout, /"Warehouse BI"/);

      assert.equal((await runCli(['keys', 'revoke', key.id], env)).code, 0);
      assert.equal(await status(key.key), '401 API_KEY_INVALID');
      const again = await runCli(['keys', 'enable', key.id], env);
      assert.notEqual(again.code, 0);
      assert.equal(again.stderr, 'safety-api: a revoked key cannot be enabled: create a new key\n');

      const events = await ctx.db
        .selectFrom('audit_events')
        .select(['action', 'actor'])
        .where('subject_id', '=', key.id)
        .orderBy('id')
        .execute();
      assert.deepEqual(
        events.map((e) => e.action),
        ['created', 'disabled', 'enabled', 'scope_changed', 'renamed', 'revoked'],
      );
      assert.ok(events.every((e) => e.actor === 'cli'));
    });

    test('--expires-at: a date keeps the key through that day; a past expiry is refused', async () => {
      const created = await runCli(
        ['keys', 'create', '--account', accountId, '--name', 'Temp', '--expires-at', '2099-12-31', '--json'],
        env,
      );
      assert.equal(created.code, 0, created.stderr);
      assert.equal(JSON.parse(created.stdout).expires_at, '2100-01-01T00:00:00.000Z');
      const exact = await runCli(
        [
          'keys',
          'create',
          '--account',
          accountId,
          '--name',
          'Temp',
          '--expires-at',
          '2099-06-01T12:30:00+02:00',
          '--json',
        ],
        env,
      );
      assert.equal(JSON.parse(exact.stdout).expires_at, '2099-06-01T10:30:00.000Z');
      const human = await runCli(['keys', 'create', '--account', accountId, '--name', 'Human'], env);
      assert.match(human.stdout, /API key \(shown once, store it now\): svc_[0-9a-f]{40}\n$/);
    });

    test('bad input exits non-zero with one line on standard error and changes nothing', async () => {
      const before = (await ctx.db.selectFrom('api_keys').select('id').execute()).length;
      const cases: [string[], RegExp][] = [
        [
          ['keys', 'create', '--account', accountId],
          /^safety-api: keys create needs --account ID and --name NAME\n$/,
        ],
        [
          ['keys', 'create', '--account', accountId, '--name', 'x', '--scope', 'write'],
          /^safety-api: scope must be one of read, read-write, admin \(got "write"\)\n$/,
        ],
        [
          ['keys', 'create', '--account', accountId, '--name', 'x', '--expires-at', '2001-01-01'],
          /^safety-api: expiry must be in the future/,
        ],
        [
          ['keys', 'create', '--account', accountId, '--name', 'x', '--expires-at', 'soon'],
          /^safety-api: expiry must be a date/,
        ],
        [
          ['keys', 'create', '--account', accountId, '--name', '   '],
          /^safety-api: name must not be empty\n$/,
        ],
        [['keys', 'create', '--account', 'nope', '--name', 'x'], /^safety-api: no account with id "nope"\n$/],
        [
          ['keys', 'create', '--account', accountId, '--name', 'x', '--colour', 'red'],
          /^safety-api: Unknown option '--colour'/,
        ],
        [['keys', 'disable', 'no-such-key'], /^safety-api: no API key with id "no-such-key"\n$/],
        [['keys', 'scope', 'no-such-key'], /^safety-api: usage: safety-api keys scope KEY_ID SCOPE\n$/],
        [['keys', 'explode'], /^safety-api: unknown keys action "explode"/],
        [['frobnicate'], /^safety-api: unknown command "frobnicate"/],
      ];
      for (const [args, expected] of cases) {
        const result = await runCli(args, env);
        assert.notEqual(result.code, 0, args.join(' '));
        assert.match(result.stderr, expected, args.join(' '));
        assert.equal(result.stderr.trim().split('\n').length, 1, args.join(' '));
      }
      assert.equal((await ctx.db.selectFrom('api_keys').select('id').execute()).length, before);
    });

    test('no key is created for an account without API access', async () => {
      const closed = await seedAccount(ctx.db, { api_access: 0 });
      const result = await runCli(['keys', 'create', '--account', closed, '--name', 'x'], env);
      assert.notEqual(result.code, 0);
      assert.match(result.stderr, /does not include API access/);
    });
  });
}
