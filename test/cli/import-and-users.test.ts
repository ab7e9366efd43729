import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { verifyPassword } from '../../src/auth/passwords.ts';
import { demoRecords, writeNdjson } from '../../src/demo/demo-data.ts';
import { bearer, createTestContext, runCli, STORES, seedKey, type TestContext } from '../helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'safety-cli-'));

for (const store of STORES) {
  describe(`safety-api import and users (${store})`, () => {
    let ctx: TestContext;
    let env: Record<string, string>;
    const accountId = randomUUID();

    before(async () => {
      ctx = await createTestContext(store);
      env = { DATABASE_URL: ctx.databaseUrl };
    });
    after(() => ctx.close());

    test('imports the demo data set; the running app serves it at once', async () => {
      const file = join(dir, `${store}-demo.ndjson`);
      await writeNdjson(file, demoRecords({ accountId, incidents: 300, users: 20, seed: 7 }));
      const result = await runCli(['import', file], env);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(
        result.stdout,
        'Imported 1 accounts, 8 departments, 6 locations, 20 users, 300 incidents.\n',
      );

      const { rawKey } = await seedKey(ctx.db, accountId);
      const page = (
        await ctx.app.inject({ url: '/api/v1/public/incidents?limit=200&page=2', headers: bearer(rawKey) })
      ).json();
      assert.deepEqual(page.data.pagination, { page: 2, limit: 200, total: 300, pages: 2 });
      const created = page.data.data.map((i: { created_at: string }) => i.created_at);
      assert.deepEqual(created, [...created].sort().reverse());
      const users = (await ctx.app.inject({ url: '/api/v1/public/users', headers: bearer(rawKey) })).json()
        .data;
      // One inactive user and one vendor support account are hidden.
      assert.equal(users.length, 18);
    });

    test('an import by another process shows at the very next request, however warm the key', async () => {
      const { rawKey } = await seedKey(ctx.db, accountId);
      const pageOne = async () =>
        (await ctx.app.inject({ url: '/api/v1/public/incidents?limit=1', headers: bearer(rawKey) })).json()
          .data;
      const before = await pageOne();
      assert.equal((await pageOne()).pagination.total, before.pagination.total);

      const file = join(dir, `${store}-newer.ndjson`);
      const newest = {
        type: 'incident',
        id: randomUUID(),
        account_id: accountId,
        incident_number: 'INC-2099-0001',
        status: 'open',
        created_at: '2099-01-01T00:00:00.000Z',
        updated_at: '2099-01-01T00:00:00.000Z',
      };
      writeFileSync(file, `${JSON.stringify(newest)}\n`);
      const result = await runCli(['import', file], env);
      assert.equal(result.code, 0, result.stderr);

      const after = await pageOne();
      assert.equal(after.pagination.total, before.pagination.total + 1);
      assert.equal(after.data[0].id, newest.id);
    });

    test('a bad file exits non-zero with one line naming the record and field, and loads nothing', async () => {
      const file = join(dir, `${store}-bad.ndjson`);
      const other = randomUUID();
      writeFileSync(
        file,
        [
          JSON.stringify({ type: 'account', id: other, name: 'Bad Co' }),
          JSON.stringify({
            type: 'incident',
            id: randomUUID(),
            account_id: other,
            incident_number: 'INC-2025-1',
            status: 'open',
            severity_impact: -1,
          }),
        ].join('\n'),
      );
      const result = await runCli(['import', file], env);
      assert.equal(result.code, 2);
      assert.equal(
        result.stderr,
        'safety-api: line 2: field "severity_impact" must be a whole number from 0 to 100 (got -1)\n',
      );
      const account = await ctx.db
        .selectFrom('accounts')
        .select('id')
        .where('id', '=', other)
        .executeTakeFirst();
      assert.equal(account, undefined);
      const usage = await runCli(['import'], env);
      assert.equal(usage.stderr, 'safety-api: usage: safety-api import FILE\n');
      // The import runs in a thread of its own; a configuration error still comes back as one.
      const misconfigured = await runCli(['import', file], { DATABASE_URL: 'mysql://db.internal/x' });
      assert.equal(misconfigured.code, 2);
      assert.equal(
        misconfigured.stderr,
        'safety-api: invalid configuration: DATABASE_URL must be sqlite:PATH or postgres://… (got "mysql://db.internal/x")\n',
      );
    });

    test('users set-password stores an scrypt hash from standard input', async () => {
      const email = 'dana.whitfield@northwind-demo.example';
      const result = await runCli(
        ['users', 'set-password', '--email', email.toUpperCase()],
        env,
        'a long passphrase\n',
      );
      assert.equal(result.code, 0, result.stderr);
      const user = await ctx.db
        .selectFrom('users')
        .select('password_hash')
        .where('email', '=', email)
        .executeTakeFirstOrThrow();
      assert.match(user.password_hash ?? '', /^scrypt\$/);
      assert.equal(await verifyPassword('a long passphrase', user.password_hash), true);
      assert.equal(await verifyPassword('a long passphrase\n', user.password_hash), false);

      const short = await runCli(['users', 'set-password', '--email', email], env, 'short\n');
      assert.equal(short.code, 2);
      assert.equal(short.stderr, 'safety-api: the password must be at least 10 characters\n');
      const unknown = await runCli(
        ['users', 'set-password', '--email', 'nobody@example.com'],
        env,
        'a long passphrase',
      );
      assert.equal(unknown.stderr, 'safety-api: no user with email "nobody@example.com"\n');
    });
  });
}

if (STORES.includes('postgres')) {
  describe('safety-api with PostgreSQL unreachable (postgres)', () => {
    // Nothing listens on port 1: every connection is refused at once.
    const env = { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/safety' };

    test('a command says the database is unavailable, with the reason, and exits 1', async () => {
      const result = await runCli(['keys', 'list', '--account', randomUUID()], env);
      assert.equal(result.code, 1);
      assert.match(result.stderr, /^safety-api: the database is unavailable: .*ECONNREFUSED.*\n$/);
      assert.equal(result.stderr.split('\n').length, 2);
    });

    test('an import says so from its writing thread, and that nothing was imported', async () => {
      const file = join(dir, 'unreachable.ndjson');
      writeFileSync(file, `${JSON.stringify({ type: 'account', id: randomUUID(), name: 'Acme' })}\n`);
      const result = await runCli(['import', file], env);
      assert.equal(result.code, 1);
      assert.match(
        result.stderr,
        /^safety-api: the database is unavailable: .*ECONNREFUSED.*; nothing was imported\n$/,
      );
    });
  });
}
