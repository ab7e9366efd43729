import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import * as oidc from 'openid-client';
import { STORES, seedAccount } from '../helpers.ts';
import {
  authorizationRequest,
  Browser,
  discover,
  formsOf,
  type OauthServer,
  PASSWORD,
  REDIRECT_URI,
  seedClient,
  seedUser,
  signInAndConsent,
  startOauthServer,
} from './harness.ts';

/**
 * Who may approve a partner app: active, non-vendor-support users only; account-wide data scopes
 * only by a Super Admin or an Admin. Other roles may approve the OpenID scopes; an app asking them
 * for more is refused (access_denied) with the reason on the page.
 */

const DATA_SCOPE = 'openid profile users:read incidents:read';
const OPENID_ONLY = 'openid profile email employment';

for (const store of STORES) {
  describe(`who may approve a partner app (${store})`, () => {
    let server: OauthServer;
    let accountId: string;
    let config: oidc.Configuration;

    before(async () => {
      server = await startOauthServer(store);
      accountId = await seedAccount(server.ctx.db);
      const client = await seedClient(server.ctx.db, accountId);
      config = await discover(server, client.clientId, client.clientSecret);
    });
    after(() => server.close());

    /** Signs in on the real page; returns the answer to the sign-in form. */
    async function signIn(browser: Browser, email: string, scope: string) {
      const { url, verifier } = await authorizationRequest(config, { scope });
      const page = await browser.follow(url.href);
      assert.equal(page.response.status, 200);
      const [form] = formsOf(await page.response.text());
      assert.ok(form);
      const answer = await browser.follow(form.action, { ...form.fields, email, password: PASSWORD });
      return { ...answer, verifier };
    }

    test('a manager asking for account-wide data is told why and sent back with access_denied', async () => {
      const manager = await seedUser(server.ctx.db, accountId, { role: 'manager' });
      const browser = new Browser(server.baseUrl);
      const answer = await signIn(browser, manager.email, DATA_SCOPE);
      assert.equal(answer.response.status, 403);
      const page = await answer.response.text();
      assert.match(page, /Only an Admin or\s+Super Admin can allow that, and your role is Manager/);
      assert.match(page, /users:read, incidents:read/);
      const forms = formsOf(page);
      assert.equal(forms.length, 1, 'no Allow button, only the way back');
      const back = await browser.follow((forms[0] as { action: string }).action, forms[0]?.fields);
      const callback = new URL(back.url);
      assert.equal(callback.origin + callback.pathname, REDIRECT_URI);
      assert.equal(callback.searchParams.get('error'), 'access_denied');
      assert.equal(callback.searchParams.get('code'), null);
    });

    test('a manager signed in already cannot allow data scopes on the consent page, even by posting Allow', async () => {
      const manager = await seedUser(server.ctx.db, accountId, { role: 'manager' });
      const browser = new Browser(server.baseUrl);
      // First an app asking for OpenID scopes only: allowed, and the browser now has a session.
      const { url } = await authorizationRequest(config, { scope: OPENID_ONLY });
      const allowed = await signInAndConsent(browser, url, { email: manager.email, password: PASSWORD });
      assert.ok(allowed.searchParams.get('code'), 'OpenID scopes are approved by any role');

      const wider = await authorizationRequest(config, { scope: DATA_SCOPE });
      const consent = await browser.follow(wider.url.href);
      assert.equal(consent.response.status, 403);
      const [back] = formsOf(await consent.response.text());
      assert.ok(back);
      // A hand-made post to the Allow action, with the interaction's own form token.
      const forged = await browser.follow(back.action.replace(/\/abort$/, '/confirm'), back.fields);
      const callback = new URL(forged.url);
      assert.equal(callback.searchParams.get('error'), 'access_denied');
      assert.equal(callback.searchParams.get('code'), null);
    });

    test('a vendor-support user may not sign in on the OAuth page', async () => {
      const vendor = await seedUser(server.ctx.db, accountId, { role: 'super_admin', vendor_support: 1 });
      const answer = await signIn(new Browser(server.baseUrl), vendor.email, OPENID_ONLY);
      assert.equal(answer.response.status, 403);
      assert.match(await answer.response.text(), /Vendor support users cannot connect partner apps/);
    });

    test('an admin approves account-wide data scopes and the token reads the data', async () => {
      const admin = await seedUser(server.ctx.db, accountId, { role: 'admin' });
      const { url, verifier } = await authorizationRequest(config, { scope: DATA_SCOPE });
      const callback = await signInAndConsent(new Browser(server.baseUrl), url, {
        email: admin.email,
        password: PASSWORD,
      });
      const tokens = await oidc.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier });
      assert.match(tokens.scope ?? '', /users:read/);
      const res = await fetch(`${server.baseUrl}/api/v1/users`, {
        headers: { authorization: `Bearer ${tokens.access_token}` },
      });
      assert.equal(res.status, 200);
    });

    test("an admin's token stops reading account-wide data at the next request after a demotion", async () => {
      const admin = await seedUser(server.ctx.db, accountId, { role: 'admin' });
      const { url, verifier } = await authorizationRequest(config, { scope: DATA_SCOPE });
      const callback = await signInAndConsent(new Browser(server.baseUrl), url, {
        email: admin.email,
        password: PASSWORD,
      });
      const tokens = await oidc.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier });
      const read = () =>
        fetch(`${server.baseUrl}/api/v1/users`, {
          headers: { authorization: `Bearer ${tokens.access_token}` },
        });
      assert.equal((await read()).status, 200);

      await server.ctx.db.updateTable('users').set({ role: 'employee' }).where('id', '=', admin.id).execute();
      const refused = await read();
      assert.equal(refused.status, 403);
      assert.match(String(refused.headers.get('www-authenticate')), /error="insufficient_scope"/);
      // The person's own OpenID claims still come.
      const me = await oidc.fetchUserInfo(config, tokens.access_token, admin.id);
      assert.equal(me.sub, admin.id);

      await server.ctx.db.updateTable('users').set({ role: 'admin' }).where('id', '=', admin.id).execute();
      assert.equal((await read()).status, 200, 'promoted again: the data is readable again');
    });
  });
}
