import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import {
  bearer,
  createTestContext,
  runCli,
  STORES,
  seedAccount,
  seedKey,
  type TestContext,
} from '../helpers.ts';

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
      // The calls are independent: run at once, each checked on its own.
      const results = await Promise.all(
        cases.map(async ([args, expected]) => ({ args, expected, result: await runCli(args, env) })),
      );
      for (const { args, expected, result } of results) {
        assert.notEqual(result.code, 0, args.join(' '));
        assert.match(result.stderr, expected, args.join(' '));
        assert.equal(result.stderr.trim().split('\n').length, 1, args.join(' '));
      }
      assert.equal((await ctx.db.selectFrom('api_keys').select('id').execute()).length, before);
    });

    test('keys roll --json: the successor as keys create prints it, plus previous_id and previous_expires_at', async () => {
      const old = await seedKey(ctx.db, accountId, { name: 'Nightly sync', scope: 'admin' });
      const rolled = await runCli(['keys', 'roll', old.id, '--overlap', 'now', '--json'], env);
      assert.equal(rolled.code, 0, rolled.stderr);
      const successor = JSON.parse(rolled.stdout);
      assert.match(successor.key, /^svc_[0-9a-f]{40}$/);
      assert.equal(successor.prefix, successor.key.slice(0, 12));
      assert.equal(successor.scope, 'admin');
      assert.equal(successor.state, 'active');
      assert.equal(successor.expires_at, null);
      assert.match(successor.name, /^Nightly sync \(rolled \d{4}-\d{2}-\d{2}\)$/);
      assert.equal(successor.previous_id, old.id);
      assert.ok(Date.parse(successor.previous_expires_at) <= Date.now());
      assert.equal(successor.rolled_from, old.id);
      assert.equal(await status(successor.key), '200 false');
      assert.equal(await status(old.rawKey), '401 API_KEY_INVALID');

      const other = await seedKey(ctx.db, accountId, { name: 'Default overlap' });
      const human = await runCli(['keys', 'roll', other.id], env);
      assert.equal(human.code, 0, human.stderr);
      assert.match(human.stdout, /API key \(shown once, store it now\): svc_[0-9a-f]{40}\n/);
      assert.equal(await status(other.rawKey), '200 false', 'the default overlap is 24 hours');
    });

    test('keys usage --json: the hours with traffic and their totals, as the servers flushed them', async () => {
      const key = await seedKey(ctx.db, accountId, { name: 'Counted' });
      const hourOf = (ms: number) => new Date(ms - (ms % 3600_000)).toISOString();
      const firstHour = hourOf(Date.now());
      for (let i = 0; i < 4; i += 1) assert.equal(await status(key.rawKey), '200 false');
      assert.equal(await status(key.rawKey, 'POST'), '403 INSUFFICIENT_SCOPE');
      await tick();
      await ctx.runtime.keyUsage.flush();
      const result = await runCli(['keys', 'usage', key.id, '--days', '1', '--json'], env);
      assert.equal(result.code, 0, result.stderr);
      const lastHour = hourOf(Date.now());
      const usage: { hours: { hour: string }[] } = JSON.parse(result.stdout);
      const totals = { ok: 4, client_errors: 1, rate_limited: 0 };
      if (firstHour === lastHour) {
        assert.deepEqual(usage, { key_id: key.id, hours: [{ hour: firstHour, ...totals }], totals });
      } else {
        // The requests straddled the end of an hour: each is in the hour it was made in.
        assert.deepEqual({ ...usage, hours: undefined }, { key_id: key.id, hours: undefined, totals });
        assert.ok(
          usage.hours.every(({ hour }) => hour === firstHour || hour === lastHour),
          result.stdout,
        );
      }
      const quiet = await seedKey(ctx.db, accountId, { name: 'Quiet' });
      const empty = await runCli(['keys', 'usage', quiet.id, '--json'], env);
      assert.deepEqual(JSON.parse(empty.stdout), {
        key_id: quiet.id,
        hours: [],
        totals: { ok: 0, client_errors: 0, rate_limited: 0 },
      });
    });

    test('keys roll and keys usage: bad input exits non-zero with one line and changes nothing', async () => {
      const key = await seedKey(ctx.db, accountId, { name: 'Untouched' });
      // The earlier tests' last uses land now, not in the middle of the comparison.
      await ctx.runtime.lastUse.flush();
      const rowsBefore = await ctx.db.selectFrom('api_keys').selectAll().orderBy('id').execute();
      const cases: [string[], RegExp][] = [
        [
          ['keys', 'roll'],
          /^safety-api: usage: safety-api keys roll KEY_ID \[--overlap now\|1h\|24h\|7d\] \[--json\]\n$/,
        ],
        [
          ['keys', 'roll', key.id, '--overlap', '2d'],
          /^safety-api: overlap must be one of now, 1h, 24h, 7d \(got "2d"\)\n$/,
        ],
        [['keys', 'roll', 'no-such-key'], /^safety-api: no API key with id "no-such-key"\n$/],
        [['keys', 'roll', key.id, 'extra'], /^safety-api: usage: safety-api keys roll/],
        [['keys', 'usage'], /^safety-api: usage: safety-api keys usage KEY_ID \[--days N\] \[--json\]\n$/],
        [
          ['keys', 'usage', key.id, '--days', '0'],
          /^safety-api: days must be a whole number from 1 to 30 \(got "0"\)\n$/,
        ],
        [['keys', 'usage', key.id, '--days', '31'], /^safety-api: days must be a whole number from 1 to 30/],
        [
          ['keys', 'usage', key.id, '--days', 'week'],
          /^safety-api: days must be a whole number from 1 to 30/,
        ],
        [['keys', 'usage', 'no-such-key'], /^safety-api: no API key with id "no-such-key"\n$/],
      ];
      const results = await Promise.all(
        cases.map(async ([args, expected]) => ({ args, expected, result: await runCli(args, env) })),
      );
      for (const { args, expected, result } of results) {
        assert.notEqual(result.code, 0, args.join(' '));
        assert.match(result.stderr, expected, args.join(' '));
        assert.equal(result.stderr.trim().split('\n').length, 1, args.join(' '));
        assert.equal(result.stdout, '', args.join(' '));
      }
      assert.deepEqual(await ctx.db.selectFrom('api_keys').selectAll().orderBy('id').execute(), rowsBefore);
    });

    test('no key is created for an account without API access', async () => {
      const closed = await seedAccount(ctx.db, { api_access: 0 });
      const result = await runCli(['keys', 'create', '--account', closed, '--name', 'x'], env);
      assert.notEqual(result.code, 0);
      assert.match(result.stderr, /does not include API access/);
    });
  });
}
