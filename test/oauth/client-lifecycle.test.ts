import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import * as oidc from 'openid-client';
import { importFile } from '../../src/import/import.ts';
import { OAUTH_PATH } from '../../src/paths.ts';
import { oauthClientService } from '../../src/services/oauth-client-service.ts';
import { bearer, createSecondInstance, STORES, seedAccount } from '../helpers.ts';
import { gone, ndjson } from '../import/files.ts';
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
} from './harness.ts';

const SCOPE = 'openid email users:read';

for (const store of STORES) {
  describe(`OAuth client lifecycle (${store})`, () => {
    let server: OauthServer;
    let accountId: string;

    before(async () => {
      server = await startOauthServer(store);
      accountId = await seedAccount(server.ctx.db);
    });
    after(() => server.close());

    function basic(clientId: string, secret: string): string {
      return `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64')}`;
    }

    /** A client-credentials token request: the quickest proof that a secret is accepted. */
    async function clientCredentialsStatus(clientId: string, secret: string): Promise<number> {
      const res = await server.ctx.app.inject({
        method: 'POST',
        url: `${OAUTH_PATH}/token`,
        headers: {
          authorization: basic(clientId, secret),
          'content-type': 'application/x-www-form-urlencoded',
        },
        payload: 'grant_type=client_credentials&scope=users%3Aread',
      });
      return res.statusCode;
    }

    /** A user approves the client through the real pages; returns the tokens. */
    async function approve(client: { clientId: string; clientSecret: string | null }, email: string) {
      const config = await discover(server, client.clientId, client.clientSecret);
      const state = oidc.randomState();
      const { url, verifier } = await authorizationRequest(config, { scope: SCOPE, state });
      const callback = await signInAndConsent(new Browser(server.baseUrl), url, {
        email,
        password: PASSWORD,
      });
      const tokens = await oidc.authorizationCodeGrant(config, callback, {
        pkceCodeVerifier: verifier,
        expectedState: state,
      });
      return { config, tokens };
    }

    test('a rotated secret keeps working until its overlap ends, then is refused; the new one works at once', async () => {
      const { clientId, clientSecret } = await seedClient(server.ctx.db, accountId);
      const old = clientSecret as string;
      const rotated = await oauthClientService.rotateSecret(server.ctx.db, clientId, '1h', 'cli');
      assert.match(rotated.client_secret, /^ocs_[0-9a-f]{64}$/);
      const overlapEnd = Date.parse(rotated.previous_secret_expires_at) - Date.now();
      assert.ok(overlapEnd > 3590_000 && overlapEnd <= 3600_000, 'the old secret has one hour');

      assert.equal(await clientCredentialsStatus(clientId, rotated.client_secret), 200);
      assert.equal(
        await clientCredentialsStatus(clientId, old),
        200,
        'the old secret works during the overlap',
      );

      // The clock reaches the end of the overlap.
      await server.ctx.db
        .updateTable('oauth_clients')
        .set({ previous_secret_expires_at: new Date(Date.now() - 1000).toISOString() })
        .where('client_id', '=', clientId)
        .execute();
      assert.equal(await clientCredentialsStatus(clientId, old), 401, 'the old secret is refused after it');
      assert.equal(await clientCredentialsStatus(clientId, rotated.client_secret), 200);

      // An overlap of `now` ends the replaced secret at once.
      const again = await oauthClientService.rotateSecret(server.ctx.db, clientId, 'now', 'cli');
      assert.equal(await clientCredentialsStatus(clientId, rotated.client_secret), 401);
      assert.equal(await clientCredentialsStatus(clientId, again.client_secret), 200);

      const events = await server.ctx.db
        .selectFrom('audit_events')
        .select(['action', 'actor'])
        .where('subject_id', '=', clientId)
        .execute();
      assert.deepEqual(events, [
        { action: 'secret_rotated', actor: 'cli' },
        { action: 'secret_rotated', actor: 'cli' },
      ]);
    });

    test('a public client has no secret to rotate, a bad overlap is refused, and nothing changes', async () => {
      const { clientId } = await seedClient(server.ctx.db, accountId, true);
      await assert.rejects(
        oauthClientService.rotateSecret(server.ctx.db, clientId, '1h', 'cli'),
        /is public/,
      );
      const confidential = await seedClient(server.ctx.db, accountId);
      await assert.rejects(
        oauthClientService.rotateSecret(server.ctx.db, confidential.clientId, '2h', 'cli'),
        /overlap must be one of now, 1h, 24h, 7d/,
      );
      assert.equal(
        await clientCredentialsStatus(confidential.clientId, confidential.clientSecret as string),
        200,
      );
    });

    test('grants are listed with user, scopes, when granted and last token use', async () => {
      const client = await seedClient(server.ctx.db, accountId);
      const user = await seedUser(server.ctx.db, accountId, { name: 'Dana Reyes' });
      const before = Date.now();
      const { tokens } = await approve(client, user.email);
      const [grant, ...others] = await oauthClientService.listGrants(server.ctx.db, client.clientId);
      assert.equal(others.length, 0);
      assert.ok(grant);
      assert.equal(grant.user_id, user.id);
      assert.equal(grant.user_name, 'Dana Reyes');
      assert.equal(grant.user_email, user.email);
      assert.deepEqual(grant.scopes.sort(), ['email', 'openid', 'users:read']);
      assert.ok(Date.parse(grant.granted_at ?? '') >= before - 1000, 'granted just now');
      assert.ok(Date.parse(grant.last_used_at ?? '') >= before - 1000, 'the token issued is a use');

      const res = await server.ctx.app.inject({ url: '/api/v1/users', headers: bearer(tokens.access_token) });
      assert.equal(res.statusCode, 200);
      const [used] = await oauthClientService.listGrants(server.ctx.db, client.clientId);
      assert.ok(Date.parse(used?.last_used_at ?? '') >= Date.parse(grant.last_used_at ?? ''));
      await assert.rejects(
        oauthClientService.listGrants(server.ctx.db, client.clientId, 'another-account'),
        /no OAuth client with id/,
        "another account's client is as absent as a missing one",
      );
    });

    test("a revoked grant's refresh and access tokens fail at once, on this instance and another", async () => {
      const client = await seedClient(server.ctx.db, accountId);
      const user = await seedUser(server.ctx.db, accountId);
      const { config, tokens } = await approve(client, user.email);
      const other = await createSecondInstance(server.ctx);
      try {
        const users = (app: typeof server.ctx.app) =>
          app.inject({ url: '/api/v1/users', headers: bearer(tokens.access_token) });
        // Both instances have served the token, so a per-instance cache would now hold it.
        assert.equal((await users(server.ctx.app)).statusCode, 200);
        assert.equal((await users(other.app)).statusCode, 200);

        const [grant] = await oauthClientService.listGrants(server.ctx.db, client.clientId);
        assert.ok(grant);
        await oauthClientService.revokeGrant(server.ctx.db, client.clientId, grant.grant_id, 'cli');

        assert.equal((await users(server.ctx.app)).statusCode, 401);
        assert.equal((await users(other.app)).statusCode, 401);
        const refresh = await other.app.inject({
          method: 'POST',
          url: `${OAUTH_PATH}/token`,
          headers: {
            authorization: basic(client.clientId, client.clientSecret as string),
            'content-type': 'application/x-www-form-urlencoded',
          },
          payload: new URLSearchParams({
            grant_type: 'refresh_token',
            refresh_token: tokens.refresh_token as string,
          }).toString(),
        });
        assert.equal(refresh.statusCode, 400);
        assert.equal(refresh.json().error, 'invalid_grant');
        await assert.rejects(oidc.refreshTokenGrant(config, tokens.refresh_token as string));
        assert.deepEqual(await oauthClientService.listGrants(server.ctx.db, client.clientId), []);
        await assert.rejects(
          oauthClientService.revokeGrant(server.ctx.db, client.clientId, grant.grant_id, 'cli'),
          /has no grant with id/,
        );
      } finally {
        await other.close();
      }
    });

    test("deactivating a user by import revokes the user's grants and their tokens", async () => {
      const client = await seedClient(server.ctx.db, accountId);
      const deactivated = await seedUser(server.ctx.db, accountId);
      const deleted = await seedUser(server.ctx.db, accountId);
      const kept = await seedUser(server.ctx.db, accountId);
      const approvals = [];
      for (const user of [deactivated, deleted, kept]) approvals.push(await approve(client, user.email));
      assert.equal((await oauthClientService.listGrants(server.ctx.db, client.clientId)).length, 3);

      const row = await server.ctx.db
        .selectFrom('users')
        .selectAll()
        .where('id', '=', deactivated.id)
        .executeTakeFirstOrThrow();
      await importFile(
        server.ctx.commandLineDb,
        ndjson([
          {
            type: 'user',
            id: row.id,
            account_id: row.account_id,
            name: row.name,
            email: row.email,
            role: row.role,
            active: false,
            created_at: row.created_at,
          },
          gone('user', deleted.id, accountId),
        ]),
      );

      const left = await oauthClientService.listGrants(server.ctx.db, client.clientId);
      assert.deepEqual(
        left.map((grant) => grant.user_id),
        [kept.id],
      );
      const tokenRows = await server.ctx.db
        .selectFrom('oauth_payloads')
        .select('model')
        .where('user_id', 'in', [deactivated.id, deleted.id])
        .execute();
      assert.deepEqual(tokenRows, [], 'no grant, token or session of theirs is left');
      const [, , keptApproval] = approvals;
      const res = await server.ctx.app.inject({
        url: '/api/v1/users',
        headers: bearer(keptApproval?.tokens.access_token as string),
      });
      assert.equal(res.statusCode, 200);
    });
  });
}
