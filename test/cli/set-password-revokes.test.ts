import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import * as oidc from 'openid-client';
import { runCli, STORES, seedAccount } from '../helpers.ts';
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
import { AdminClient } from '../routes/admin/admin-helpers.ts';

/** `users set-password` ends what the old password opened. Needs the bundle (scripts/build.mjs). */

const INTEGRATIONS = '/admin/settings/integrations';

for (const store of STORES) {
  describe(`users set-password ends sessions and grants (${store})`, () => {
    let server: OauthServer;

    before(async () => {
      server = await startOauthServer(store);
    });
    after(() => server.close());

    test('an admin session cookie and OAuth access and refresh tokens stop working', async () => {
      const accountId = await seedAccount(server.ctx.db);
      const user = await seedUser(server.ctx.db, accountId, { role: 'super_admin' });
      const bystander = await seedUser(server.ctx.db, accountId, { role: 'super_admin' });
      const client = await seedClient(server.ctx.db, accountId);
      const config = await discover(server, client.clientId, client.clientSecret);

      const panel = new AdminClient(server.ctx.app);
      assert.equal((await panel.signIn(user.email)).statusCode, 303);
      assert.equal((await panel.get(INTEGRATIONS)).statusCode, 200);
      const otherPanel = new AdminClient(server.ctx.app);
      assert.equal((await otherPanel.signIn(bystander.email)).statusCode, 303);

      const browser = new Browser(server.baseUrl);
      const { url, verifier } = await authorizationRequest(config, { scope: 'openid users:read' });
      const callback = await signInAndConsent(browser, url, { email: user.email, password: PASSWORD });
      const tokens = await oidc.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier });
      const api = (token: string) =>
        fetch(`${server.baseUrl}/api/v1/users`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal((await api(tokens.access_token)).status, 200);

      const result = await runCli(
        ['users', 'set-password', '--email', user.email],
        { DATABASE_URL: server.ctx.databaseUrl },
        'a brand new passphrase\n',
      );
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stdout, /Password set for/);

      const signedOut = await panel.get(INTEGRATIONS);
      assert.equal(signedOut.statusCode, 303);
      assert.equal(signedOut.headers.location, '/admin/sign-in');
      assert.equal((await otherPanel.get(INTEGRATIONS)).statusCode, 200, "another user's session stays");

      assert.equal((await api(tokens.access_token)).status, 401);
      await assert.rejects(oidc.refreshTokenGrant(config, tokens.refresh_token as string), (error) => {
        assert.ok(error instanceof oidc.ResponseBodyError);
        assert.equal(error.error, 'invalid_grant');
        return true;
      });

      // The provider's sign-in session is gone too: the next authorization asks for the password.
      const next = await authorizationRequest(config, { scope: 'openid' });
      const page = await browser.follow(next.url.href);
      assert.equal(page.response.status, 200);
      assert.match(await page.response.text(), /name="password"/);
      const rows = await server.ctx.db
        .selectFrom('oauth_payloads')
        .select('model')
        .where('user_id', '=', user.id)
        .execute();
      assert.deepEqual(rows, []);
    });
  });
}
