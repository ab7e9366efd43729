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

/**
 * No new tokens without API access (DESIGN "Wider API"): while the account's plan lacks
 * `api_access`, the authorization and token endpoints refuse its clients with `unauthorized_client`,
 * and nothing is used up, so the same code and refresh token work once the plan allows it again.
 */

const PLAN_MESSAGE = /plan of this app(?:'|&#39;)s account does not include API access/;

function isUnauthorizedClient(error: unknown): boolean {
  assert.ok(error instanceof oidc.ResponseBodyError, String(error));
  assert.equal(error.error, 'unauthorized_client');
  assert.match(error.error_description ?? '', PLAN_MESSAGE);
  return true;
}

for (const store of STORES) {
  describe(`OAuth 2 without API access in the plan (${store})`, () => {
    let server: OauthServer;
    let accountId: string;
    let user: { id: string; email: string };
    let config: oidc.Configuration;

    const setApiAccess = (value: number) =>
      server.ctx.db.updateTable('accounts').set({ api_access: value }).where('id', '=', accountId).execute();

    before(async () => {
      server = await startOauthServer(store);
      accountId = await seedAccount(server.ctx.db);
      user = await seedUser(server.ctx.db, accountId);
      const client = await seedClient(server.ctx.db, accountId);
      config = await discover(server, client.clientId, client.clientSecret);
    });
    after(() => server.close());

    async function codeCallback(): Promise<{ callback: URL; verifier: string; state: string }> {
      const state = oidc.randomState();
      const { url, verifier } = await authorizationRequest(config, { scope: 'openid profile', state });
      const callback = await signInAndConsent(new Browser(server.baseUrl), url, {
        email: user.email,
        password: PASSWORD,
      });
      assert.ok(callback.searchParams.get('code'), callback.href);
      return { callback, verifier, state };
    }

    test('client credentials, authorization code and refresh are refused (revocation is not), and work again when the plan allows', async () => {
      const issued = await codeCallback();
      const first = await oidc.authorizationCodeGrant(config, issued.callback, {
        pkceCodeVerifier: issued.verifier,
        expectedState: issued.state,
      });
      assert.ok(first.refresh_token);
      const pending = await codeCallback();
      const toRevoke = (await oidc.clientCredentialsGrant(config, { scope: 'users:read' })).access_token;
      const api = (token: string) =>
        fetch(`${server.baseUrl}/api/v1/users`, { headers: { authorization: `Bearer ${token}` } });

      await setApiAccess(0);
      try {
        await assert.rejects(
          oidc.clientCredentialsGrant(config, { scope: 'users:read' }),
          isUnauthorizedClient,
        );
        await assert.rejects(
          oidc.refreshTokenGrant(config, first.refresh_token as string),
          isUnauthorizedClient,
        );
        await assert.rejects(
          oidc.authorizationCodeGrant(config, pending.callback, {
            pkceCodeVerifier: pending.verifier,
            expectedState: pending.state,
          }),
          isUnauthorizedClient,
        );

        // The authorization endpoint: no sign-in page, a page that names the reason.
        const { url } = await authorizationRequest(config, { scope: 'openid profile' });
        const page = await new Browser(server.baseUrl).request(url.href);
        assert.equal(page.status, 400);
        const html = await page.text();
        assert.match(html, PLAN_MESSAGE);
        assert.doesNotMatch(html, /type="password"/);

        // Giving tokens up stays possible.
        await oidc.tokenRevocation(config, toRevoke);
      } finally {
        await setApiAccess(1);
      }

      // Nothing was consumed by the refusals: the same refresh token and code still work.
      const refreshed = await oidc.refreshTokenGrant(config, first.refresh_token as string);
      assert.ok(refreshed.access_token);
      const redeemed = await oidc.authorizationCodeGrant(config, pending.callback, {
        pkceCodeVerifier: pending.verifier,
        expectedState: pending.state,
      });
      assert.ok(redeemed.access_token);
      const fresh = (await oidc.clientCredentialsGrant(config, { scope: 'users:read' })).access_token;
      assert.equal((await api(fresh)).status, 200);
      assert.equal((await api(toRevoke)).status, 401, 'the revocation made without API access took effect');
    });
  });
}
