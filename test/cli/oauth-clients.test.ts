import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { openDatabase } from '../../src/db/database.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import { createTestDatabase, runCli, STORES, seedAccount, type TestDatabase } from '../helpers.ts';

for (const store of STORES) {
  describe(`safety-api oauth-clients (${store})`, () => {
    let database: TestDatabase;
    let env: Record<string, string>;
    const accountId = '6d1f2c3a-0000-4000-8000-000000000001';

    before(async () => {
      database = await createTestDatabase(store);
      env = { DATABASE_URL: database.url };
      const handle = openDatabase(database.url);
      await migrateToLatest(handle.db);
      await seedAccount(handle.db, { id: accountId });
      await handle.destroy();
    });
    after(() => database.drop());

    test('create --json prints the client id and the secret once; list and delete', async () => {
      const created = await runCli(
        [
          'oauth-clients',
          'create',
          '--account',
          accountId,
          '--name',
          'BI sync',
          '--redirect-uri',
          'https://partner.example/cb',
          '--json',
        ],
        env,
      );
      assert.equal(created.code, 0, created.stderr);
      const client = JSON.parse(created.stdout);
      assert.match(client.client_id, /^oc_[0-9a-f]{32}$/);
      assert.match(client.client_secret, /^ocs_[0-9a-f]{64}$/);
      assert.equal(client.type, 'confidential');
      assert.deepEqual(client.redirect_uris, ['https://partner.example/cb']);

      const publicClient = await runCli(
        [
          'oauth-clients',
          'create',
          '--account',
          accountId,
          '--name',
          'Mobile',
          '--redirect-uri',
          'http://localhost:8000/cb',
          '--public',
          '--json',
        ],
        env,
      );
      assert.equal(publicClient.code, 0, publicClient.stderr);
      assert.equal(JSON.parse(publicClient.stdout).client_secret, undefined);

      const listed = await runCli(['oauth-clients', 'list', '--account', accountId, '--json'], env);
      assert.equal(listed.code, 0, listed.stderr);
      const clients = JSON.parse(listed.stdout);
      assert.equal(clients.length, 2);
      assert.ok(
        clients.every((c: Record<string, unknown>) => !('client_secret' in c)),
        'secrets are never listed',
      );
      assert.ok(!listed.stdout.includes(client.client_secret));

      const deleted = await runCli(['oauth-clients', 'delete', client.client_id], env);
      assert.equal(deleted.code, 0, deleted.stderr);
      const after = JSON.parse(
        (await runCli(['oauth-clients', 'list', '--account', accountId, '--json'], env)).stdout,
      );
      assert.equal(after.length, 1);
    });

    test('bad input exits non-zero with one line on standard error', async () => {
      const cases = [
        ['oauth-clients', 'create', '--account', accountId, '--name', 'X'],
        [
          'oauth-clients',
          'create',
          '--account',
          accountId,
          '--name',
          'X',
          '--redirect-uri',
          'http://partner.example/cb',
        ],
        [
          'oauth-clients',
          'create',
          '--account',
          'nope',
          '--name',
          'X',
          '--redirect-uri',
          'https://a.example/cb',
        ],
        ['oauth-clients', 'delete', 'oc_unknown'],
      ];
      // Each run is a new process; running them together keeps the file within the runner's timeout.
      const results = await Promise.all(cases.map((args) => runCli(args, env)));
      for (const [i, result] of results.entries()) {
        const args = cases[i] as string[];
        assert.notEqual(result.code, 0, args.join(' '));
        assert.equal(result.stderr.trim().split('\n').length, 1, `${args.join(' ')}: ${result.stderr}`);
        assert.match(result.stderr, /^safety-api: /);
      }
    });
  });
}
