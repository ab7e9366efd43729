import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import * as oidc from 'openid-client';
import { STORES, seedAccount } from '../helpers.ts';
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

const SCOPE = 'openid profile email employment users:read incidents:read';

for (const store of STORES) {
  describe(`OAuth 2 flows (${store})`, () => {
    let server: OauthServer;
    let accountId: string;
    let user: { id: string; email: string };
    let confidential: { clientId: string; clientSecret: string | null };

    before(async () => {
      server = await startOauthServer(store);
      accountId = await seedAccount(server.ctx.db);
      user = await seedUser(server.ctx.db, accountId, { name: 'Dana Reyes', role: 'admin' });
      confidential = await seedClient(server.ctx.db, accountId);
    });
    after(() => server.close());

    /** Authorization code with PKCE through the real pages; returns the token response. */
    async function authorize(config: oidc.Configuration, scope = SCOPE) {
      const state = oidc.randomState();
      const { url, verifier } = await authorizationRequest(config, { scope, state });
      const callback = await signInAndConsent(new Browser(server.baseUrl), url, {
        email: user.email,
        password: PASSWORD,
      });
      return oidc.authorizationCodeGrant(config, callback, {
        pkceCodeVerifier: verifier,
        expectedState: state,
      });
    }

    test('discovery names the spec paths under the issuer, with a JWKS and S256 only', async () => {
      const config = await discover(server, confidential.clientId, confidential.clientSecret);
      const meta = config.serverMetadata();
      const issuer = server.issuer.href;
      assert.equal(meta.issuer, issuer);
      assert.equal(meta.authorization_endpoint, `${issuer}/authorize`);
      assert.equal(meta.token_endpoint, `${issuer}/token`);
      assert.equal(meta.revocation_endpoint, `${issuer}/revoke`);
      assert.equal(meta.userinfo_endpoint, `${issuer}/userinfo`);
      assert.deepEqual(meta.code_challenge_methods_supported, ['S256']);
      const jwks = await (await fetch(meta.jwks_uri as string)).json();
      assert.equal(jwks.keys.length, 1);
      assert.equal(jwks.keys[0].d, undefined, 'the JWKS publishes public keys only');
    });

    test('authorization code + PKCE through sign-in and consent, then userinfo with the scoped claims', async () => {
      const config = await discover(server, confidential.clientId, confidential.clientSecret);
      const tokens = await authorize(config);
      assert.ok(tokens.access_token);
      assert.ok(tokens.refresh_token, 'a refresh token is issued');
      assert.equal(tokens.claims()?.sub, user.id);

      const info = await oidc.fetchUserInfo(config, tokens.access_token, user.id);
      assert.deepEqual(info, {
        sub: user.id,
        name: 'Dana Reyes',
        email: user.email,
        role: 'admin',
        department: 'Operations',
        job_title: 'Shift lead',
      });

      const narrow = await authorize(config, 'openid email');
      const narrowInfo = await oidc.fetchUserInfo(config, narrow.access_token, user.id);
      assert.deepEqual(narrowInfo, { sub: user.id, email: user.email }, 'claims follow the scopes');
    });

    test('a public client signs in with PKCE and no secret', async () => {
      const publicClient = await seedClient(server.ctx.db, accountId, true);
      assert.equal(publicClient.clientSecret, null);
      const config = await discover(server, publicClient.clientId, null);
      const tokens = await authorize(config, 'openid users:read');
      const res = await fetch(`${server.baseUrl}/api/v1/users`, {
        headers: { authorization: `Bearer ${tokens.access_token}` },
      });
      assert.equal(res.status, 200);
    });

    test('refresh through /token/refresh rotates the refresh token; reusing the old one revokes the grant', async () => {
      const config = await discover(server, confidential.clientId, confidential.clientSecret);
      const first = await authorize(config);
      const refreshConfig = new oidc.Configuration(
        {
          ...(config.serverMetadata() as oidc.ServerMetadata),
          token_endpoint: `${server.issuer.href}/token/refresh`,
        },
        confidential.clientId,
        undefined,
        oidc.ClientSecretBasic(confidential.clientSecret as string),
      );
      oidc.allowInsecureRequests(refreshConfig);

      const second = await oidc.refreshTokenGrant(refreshConfig, first.refresh_token as string);
      assert.ok(second.refresh_token);
      assert.notEqual(second.refresh_token, first.refresh_token, 'the refresh token rotates');

      // The grant type is implied: a body with only the refresh token works too.
      const basic = Buffer.from(`${confidential.clientId}:${confidential.clientSecret}`).toString('base64');
      const implied = await fetch(`${server.issuer.href}/token/refresh`, {
        method: 'POST',
        headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ refresh_token: second.refresh_token as string }),
      });
      assert.equal(implied.status, 200);
      const third = await implied.json();
      assert.ok(third.access_token);

      const api = (token: string) =>
        fetch(`${server.baseUrl}/api/v1/users`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal((await api(third.access_token)).status, 200);

      await assert.rejects(oidc.refreshTokenGrant(refreshConfig, first.refresh_token as string), (error) => {
        assert.ok(error instanceof oidc.ResponseBodyError);
        assert.equal(error.error, 'invalid_grant');
        return true;
      });
      await assert.rejects(
        oidc.refreshTokenGrant(refreshConfig, third.refresh_token),
        'reuse revoked the whole grant, so the newest refresh token is dead too',
      );
      assert.equal((await api(third.access_token)).status, 401, 'and so are its access tokens');
    });

    test('revocation (RFC 7009) ends an access token at once', async () => {
      const config = await discover(server, confidential.clientId, confidential.clientSecret);
      const tokens = await authorize(config);
      const api = () =>
        fetch(`${server.baseUrl}/api/v1/users`, {
          headers: { authorization: `Bearer ${tokens.access_token}` },
        });
      assert.equal((await api()).status, 200);
      await oidc.tokenRevocation(config, tokens.access_token);
      const res = await api();
      assert.equal(res.status, 401);
      assert.match(res.headers.get('www-authenticate') ?? '', /invalid_token/);
      await assert.rejects(oidc.fetchUserInfo(config, tokens.access_token, user.id));
    });

    test("client credentials: a token for the client's account, limited to the requested scopes", async () => {
      const config = await discover(server, confidential.clientId, confidential.clientSecret);
      const tokens = await oidc.clientCredentialsGrant(config, { scope: 'users:read' });
      const get = (path: string) =>
        fetch(`${server.baseUrl}/api/v1/${path}`, {
          headers: { authorization: `Bearer ${tokens.access_token}` },
        });
      const users = await get('users');
      assert.equal(users.status, 200);
      assert.ok((await users.json()).response.some((u: { id: string }) => u.id === user.id));
      const incidents = await get('incidents');
      assert.equal(incidents.status, 403);
      assert.match(incidents.headers.get('www-authenticate') ?? '', /insufficient_scope/);
    });
  });
}
