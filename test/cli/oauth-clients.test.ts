import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { openDatabase } from '../../src/db/database.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import { oauthClientRepository } from '../../src/db/repositories/oauth-clients.ts';
import { kyselyAdapter } from '../../src/oauth/adapter.ts';
import { oauthClientService } from '../../src/services/oauth-client-service.ts';
import { createTestDatabase, runCli, STORES, seedAccount, type TestDatabase } from '../helpers.ts';
import { seedUser } from '../routes/admin/admin-helpers.ts';

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

    /** A confidential client and one user's grant of it, stored as the provider stores them. */
    async function clientWithGrant(): Promise<{ clientId: string; grantId: string; userId: string }> {
      const handle = openDatabase(database.url);
      try {
        const { client } = await oauthClientService.create(handle.db, {
          accountId,
          name: 'Partner',
          redirectUris: ['https://partner.example/cb'],
          isPublic: false,
        });
        const user = await seedUser(handle.db, accountId, { name: 'Dana Reyes' });
        const grantId = `grant-${user.id}`;
        const iat = Math.floor(Date.parse('2026-03-01T10:00:00.000Z') / 1000);
        await kyselyAdapter(handle.db)('Grant').upsert(
          grantId,
          {
            kind: 'Grant',
            jti: grantId,
            accountId: user.id,
            clientId: client.client_id,
            openid: { scope: 'openid email' },
            iat,
            exp: iat + 86_400 * 365,
          },
          86_400 * 365,
        );
        return { clientId: client.client_id, grantId, userId: user.id };
      } finally {
        await handle.destroy();
      }
    }

    async function secretHashOf(clientId: string): Promise<string | null | undefined> {
      const handle = openDatabase(database.url);
      try {
        return (await oauthClientRepository.findById(handle.db, clientId))?.secret_hash;
      } finally {
        await handle.destroy();
      }
    }

    test('rotate-secret --json prints the new secret once and when the old one stops', async () => {
      const { clientId } = await clientWithGrant();
      const before = await secretHashOf(clientId);
      const started = Date.now();
      const rotated = await runCli(
        ['oauth-clients', 'rotate-secret', clientId, '--overlap', '7d', '--json'],
        env,
      );
      assert.equal(rotated.code, 0, rotated.stderr);
      const body = JSON.parse(rotated.stdout);
      assert.deepEqual(Object.keys(body).sort(), [
        'client_id',
        'client_secret',
        'previous_secret_expires_at',
      ]);
      assert.equal(body.client_id, clientId);
      assert.match(body.client_secret, /^ocs_[0-9a-f]{64}$/);
      const overlap = Date.parse(body.previous_secret_expires_at) - started;
      assert.ok(overlap >= 7 * 86_400_000 && overlap < 7 * 86_400_000 + 60_000);
      assert.notEqual(await secretHashOf(clientId), before);
    });

    test('grants --json lists who granted access; revoke-grant ends it', async () => {
      const { clientId, grantId, userId } = await clientWithGrant();
      const listed = await runCli(['oauth-clients', 'grants', clientId, '--json'], env);
      assert.equal(listed.code, 0, listed.stderr);
      const [grant, ...rest] = JSON.parse(listed.stdout);
      assert.equal(rest.length, 0);
      assert.equal(grant.grant_id, grantId);
      assert.equal(grant.user_id, userId);
      assert.equal(grant.user_name, 'Dana Reyes');
      assert.match(grant.user_email, /@example\.test$/);
      assert.deepEqual(grant.scopes, ['openid', 'email']);
      assert.equal(grant.granted_at, '2026-03-01T10:00:00.000Z');
      assert.equal(grant.last_used_at, null);

      const revoked = await runCli(['oauth-clients', 'revoke-grant', clientId, grantId], env);
      assert.equal(revoked.code, 0, revoked.stderr);
      const after = await runCli(['oauth-clients', 'grants', clientId, '--json'], env);
      assert.deepEqual(JSON.parse(after.stdout), []);
    });

    test('bad lifecycle input exits non-zero with one line and changes nothing', async () => {
      const { clientId, grantId } = await clientWithGrant();
      const before = await secretHashOf(clientId);
      const cases = [
        ['oauth-clients', 'rotate-secret', clientId, '--overlap', '2h'],
        ['oauth-clients', 'rotate-secret', 'oc_unknown'],
        ['oauth-clients', 'rotate-secret'],
        ['oauth-clients', 'grants', 'oc_unknown', '--json'],
        ['oauth-clients', 'grants'],
        ['oauth-clients', 'revoke-grant', clientId, 'no-such-grant'],
        ['oauth-clients', 'revoke-grant', 'oc_unknown', grantId],
        ['oauth-clients', 'revoke-grant', clientId],
      ];
      const results = await Promise.all(cases.map((args) => runCli(args, env)));
      for (const [i, result] of results.entries()) {
        const args = (cases[i] as string[]).join(' ');
        assert.notEqual(result.code, 0, args);
        assert.equal(result.stderr.trim().split('\n').length, 1, `${args}: ${result.stderr}`);
        assert.match(result.stderr, /^safety-api: /, args);
      }
      assert.equal(await secretHashOf(clientId), before, 'the secret is unchanged');
      const listed = JSON.parse((await runCli(['oauth-clients', 'grants', clientId, '--json'], env)).stdout);
      assert.deepEqual(
        listed.map((grant: { grant_id: string }) => grant.grant_id),
        [grantId],
        'the grant is still there',
      );
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
