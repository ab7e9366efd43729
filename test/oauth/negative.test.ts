import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import * as oidc from 'openid-client';
import { bearer, STORES, seedAccount, seedKey } from '../helpers.ts';
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

for (const store of STORES) {
  describe(`OAuth 2 refusals (${store})`, () => {
    let server: OauthServer;
    let accountId: string;
    let user: { id: string; email: string };
    let client: { clientId: string; clientSecret: string | null };
    let config: oidc.Configuration;

    before(async () => {
      server = await startOauthServer(store);
      accountId = await seedAccount(server.ctx.db);
      user = await seedUser(server.ctx.db, accountId);
      client = await seedClient(server.ctx.db, accountId);
      config = await discover(server, client.clientId, client.clientSecret);
    });
    after(() => server.close());

    /** A fresh authorization request followed to the real sign-in page; returns its form. */
    async function openSignInForm(browser: Browser) {
      const { url } = await authorizationRequest(config, { scope: 'openid' });
      const page = await browser.follow(url.href);
      const [form] = formsOf(await page.response.text());
      assert.ok(form, 'the sign-in page has a form');
      return form;
    }

    async function tokensFor(email: string, scope = 'openid users:read') {
      const { url, verifier } = await authorizationRequest(config, { scope });
      const callback = await signInAndConsent(new Browser(server.baseUrl), url, {
        email,
        password: PASSWORD,
      });
      return oidc.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier });
    }

    const api = (token: string, path = 'users') =>
      fetch(`${server.baseUrl}/api/v1/${path}`, { headers: { authorization: `Bearer ${token}` } });

    test('an unregistered redirect URI is refused on the server, never redirected to', async () => {
      const { url } = await authorizationRequest(config, {
        scope: 'openid',
        redirectUri: 'https://attacker.example/callback',
      });
      const res = await fetch(url, { redirect: 'manual' });
      assert.equal(res.status, 400);
      assert.equal(res.headers.get('location'), null);
      assert.match(await res.text(), /redirect_uri/);
    });

    test('an authorization request without PKCE is refused with invalid_request', async () => {
      const url = oidc.buildAuthorizationUrl(config, { redirect_uri: REDIRECT_URI, scope: 'openid' });
      const res = await fetch(url, { redirect: 'manual' });
      assert.equal(res.status, 303);
      const location = new URL(res.headers.get('location') as string);
      assert.equal(location.origin + location.pathname, REDIRECT_URI);
      assert.equal(location.searchParams.get('error'), 'invalid_request');
      assert.match(location.searchParams.get('error_description') ?? '', /PKCE|code_challenge/);
    });

    test('a wrong client secret is invalid_client', async () => {
      const wrong = await discover(server, client.clientId, `${client.clientSecret}x`);
      await assert.rejects(oidc.clientCredentialsGrant(wrong, { scope: 'users:read' }), (error) => {
        assert.ok(error instanceof oidc.WWWAuthenticateChallengeError);
        assert.equal(error.status, 401);
        assert.equal(error.cause[0]?.parameters.error, 'invalid_client');
        return true;
      });
    });

    test('a wrong password re-shows the sign-in page; repeated failures are throttled', async () => {
      const browser = new Browser(server.baseUrl);
      const form = await openSignInForm(browser);
      const email = (await seedUser(server.ctx.db, accountId)).email;
      const attempt = () =>
        browser.request(form.action, { ...form.fields, email, password: 'wrong password' });

      const first = await attempt();
      assert.equal(first.status, 401);
      assert.match(await first.text(), /Email or password is incorrect/);
      for (let i = 1; i < 5; i++) await attempt();
      const throttled = await browser.request(form.action, { ...form.fields, email, password: PASSWORD });
      assert.equal(throttled.status, 429, 'even the right password waits once the limit is reached');
      assert.match(await throttled.text(), /Too many failed sign-in attempts/);
    });

    test('a client id or request_uri no store can hold (NUL) is unknown, exactly as any other', async () => {
      const form = (fields: Record<string, string>): RequestInit => ({
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(fields).toString(),
      });
      const answer = async (path: string, init?: RequestInit) => {
        const res = await fetch(`${server.issuer.href}${path}`, { redirect: 'manual', ...init });
        return { status: res.status, location: res.headers.get('location'), body: await res.text() };
      };
      const invalidClient = { error: 'invalid_client', error_description: 'client authentication failed' };
      const challenge =
        'code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256';
      for (const clientId of ['oc_nobody\u0000', 'oc_nobody']) {
        const id = encodeURIComponent(clientId);
        for (const [path, fields] of [
          ['/token', { grant_type: 'client_credentials', client_id: clientId, client_secret: 'x' }],
          ['/token/refresh', { refresh_token: 'x', client_id: clientId, client_secret: 'x' }],
          ['/revoke', { token: 'x', client_id: clientId, client_secret: 'x' }],
          ['/request', { response_type: 'code', client_id: clientId, client_secret: 'x' }],
        ] as const) {
          const res = await answer(path, form(fields));
          assert.equal(res.status, 401, `${path} ${JSON.stringify(clientId)}`);
          assert.deepEqual(JSON.parse(res.body), invalidClient);
        }
        const signOut = await answer(`/session/end?client_id=${id}`);
        assert.equal(signOut.status, 400);
        assert.deepEqual(JSON.parse(signOut.body), {
          error: 'invalid_client',
          error_description: 'client is invalid',
        });
        const authorize = await answer(
          `/authorize?client_id=${id}&response_type=code&scope=openid&redirect_uri=${encodeURIComponent(REDIRECT_URI)}&${challenge}`,
        );
        assert.equal(authorize.status, 400);
        assert.equal(authorize.location, null);
        assert.match(
          authorize.body,
          /<h1>The app could not connect<\/h1><p class="error" role="alert">client is invalid<\/p>/,
        );
      }
      for (const requestUri of [
        'urn:ietf:params:oauth:request_uri:\u0000',
        'urn:ietf:params:oauth:request_uri:x',
      ]) {
        const pushed = await answer(
          `/authorize?client_id=${client.clientId}&request_uri=${encodeURIComponent(requestUri)}`,
        );
        assert.equal(pushed.status, 303);
        const location = new URL(pushed.location ?? '');
        assert.equal(location.origin + location.pathname, REDIRECT_URI);
        assert.equal(location.searchParams.get('error'), 'invalid_request_uri');
      }
    });

    test('an email no store can hold (NUL) belongs to no one: the sign-in page says incorrect, as for an unknown email', async () => {
      const browser = new Browser(server.baseUrl);
      const form = await openSignInForm(browser);
      const res = await browser.request(form.action, {
        ...form.fields,
        email: `${user.email}\u0000`,
        password: PASSWORD,
      });
      assert.equal(res.status, 401);
      assert.match(await res.text(), /Email or password is incorrect/);
    });

    test('a form post without the form token is refused', async () => {
      const browser = new Browser(server.baseUrl);
      const form = await openSignInForm(browser);
      const res = await browser.request(form.action, { email: user.email, password: PASSWORD });
      assert.equal(res.status, 403);
    });

    test('a sign-in form whose fields are not single strings re-shows the form, counting no attempt', async () => {
      const browser = new Browser(server.baseUrl);
      const form = await openSignInForm(browser);
      const token: [string, string] = ['csrf_token', form.fields.csrf_token as string];
      const repeatedEmail: [string, string][] = [token, ['email', user.email], ['email', 'b@example.com']];
      const repeatedPassword: [string, string][] = [token, ['email', user.email], ['password', 'wrong']];
      repeatedEmail.push(['password', 'wrong password']);
      repeatedPassword.push(['password', 'another wrong']);
      // Twice each, with the JSON below five posts: as many as wrong passwords that throttle.
      for (const fields of [repeatedEmail, repeatedPassword, repeatedEmail, repeatedPassword]) {
        const res = await browser.request(form.action, fields);
        assert.equal(res.status, 400);
        assert.match(await res.text(), /Enter your email and password/);
      }
      const json = await browser.postJson(form.action, {
        csrf_token: token[1],
        email: [user.email],
        password: 1,
      });
      assert.equal(json.status, 400);
      assert.match(await json.text(), /Enter your email and password/);
      // None of them was an attempt: the right password still signs in at once.
      const res = await browser.request(form.action, {
        ...form.fields,
        email: user.email,
        password: PASSWORD,
      });
      assert.equal(res.status, 303);
    });

    test('a form token that is not a single string is refused like a missing one', async () => {
      const browser = new Browser(server.baseUrl);
      const form = await openSignInForm(browser);
      const token = form.fields.csrf_token as string;
      const repeated = await browser.request(form.action, [
        ['csrf_token', token],
        ['csrf_token', token],
        ['email', user.email],
        ['password', PASSWORD],
      ]);
      assert.equal(repeated.status, 403);
      for (const action of ['login', 'confirm', 'abort']) {
        const res = await browser.postJson(form.action.replace(/login$/, action), { csrf_token: { token } });
        assert.equal(res.status, 403, action);
        assert.match(await res.text(), /The form has expired/);
      }
    });

    test("a user of another account cannot sign in to this account's client", async () => {
      const otherAccount = await seedAccount(server.ctx.db);
      const outsider = await seedUser(server.ctx.db, otherAccount);
      const browser = new Browser(server.baseUrl);
      const form = await openSignInForm(browser);
      const res = await browser.request(form.action, {
        ...form.fields,
        email: outsider.email,
        password: PASSWORD,
      });
      assert.equal(res.status, 403);
      assert.match(await res.text(), /not registered for your organization/);
    });

    test('a token whose user left the account, an expired token and an API key all get 401', async () => {
      const mover = await seedUser(server.ctx.db, accountId);
      const moved = await tokensFor(mover.email);
      assert.equal((await api(moved.access_token)).status, 200);
      const elsewhere = await seedAccount(server.ctx.db);
      await server.ctx.db
        .updateTable('users')
        .set({ account_id: elsewhere })
        .where('id', '=', mover.id)
        .execute();
      assert.equal((await api(moved.access_token)).status, 401, 'cross-account token');

      const expiring = await tokensFor(user.email);
      await server.ctx.db
        .updateTable('oauth_payloads')
        .set({ expires_at: '2000-01-01T00:00:00.000Z' })
        .where('model', '=', 'AccessToken')
        .execute();
      const expired = await api(expiring.access_token);
      assert.equal(expired.status, 401);
      assert.deepEqual(await expired.json(), {
        error: true,
        message: 'The access token is invalid, expired or revoked.',
      });

      const { rawKey } = await seedKey(server.ctx.db, accountId);
      const withKey = await fetch(`${server.baseUrl}/api/v1/users`, { headers: bearer(rawKey) });
      assert.equal(withKey.status, 401);
      assert.match((await withKey.json()).message, /API keys are not accepted/);
      const none = await fetch(`${server.baseUrl}/api/v1/users`);
      assert.equal(none.status, 401);
      assert.equal(none.headers.get('www-authenticate'), 'Bearer realm="safety-api"');
    });

    test("a deleted client's tokens stop working", async () => {
      const doomed = await seedClient(server.ctx.db, accountId);
      const doomedConfig = await discover(server, doomed.clientId, doomed.clientSecret);
      const tokens = await oidc.clientCredentialsGrant(doomedConfig, { scope: 'users:read' });
      assert.equal((await api(tokens.access_token)).status, 200);
      await server.ctx.db.deleteFrom('oauth_clients').where('client_id', '=', doomed.clientId).execute();
      assert.equal((await api(tokens.access_token)).status, 401);
    });
  });
}
