import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  AuthenticationError,
  createClient,
  createOAuthClient,
  type OAuthClient,
  PermissionError,
  SafetyApiError,
} from '../../packages/sdk/src/index.ts';
import { STORES, seedAccount, seedIncidents } from '../helpers.ts';
import {
  Browser,
  type OauthServer,
  PASSWORD,
  REDIRECT_URI,
  seedClient,
  seedUser,
  signInAndConsent,
  startOauthServer,
} from '../oauth/harness.ts';

/**
 * The SDK's OAuth 2 client (`createOAuthClient`) and the wider API through `createClient({
 * accessToken })`, against the real authorization server, on each store (grants, codes and tokens
 * live in the store). A person's approval goes through the real sign-in and consent pages.
 */

const INCIDENTS = 45;
const DATA_SCOPES = 'incidents:read users:read departments:read locations:read';

/** Rejects with a SafetyApiError, which it returns. */
async function apiError(call: Promise<unknown>): Promise<SafetyApiError> {
  const error = await call.catch((caught: unknown) => caught);
  assert.ok(error instanceof SafetyApiError, `a SafetyApiError, got ${String(error)}`);
  return error;
}

for (const store of STORES) {
  describe(`SDK: OAuth 2 and the wider API (${store})`, () => {
    let server: OauthServer;
    let oauth: OAuthClient;
    let person: { email: string; password: string };
    let clientId: string;
    let accountId: string;
    let incidentNumbers: string[];

    before(async () => {
      server = await startOauthServer(store);
      const { db } = server.ctx;
      accountId = await seedAccount(db, { rate_limit_per_hour: 10_000 });
      incidentNumbers = (await seedIncidents(db, accountId, INCIDENTS))
        .map((row) => row.incident_number)
        .reverse();
      const user = await seedUser(db, accountId, { name: 'Ann Admin' });
      person = { email: user.email, password: PASSWORD };
      const client = await seedClient(db, accountId);
      assert.ok(client.clientSecret !== null);
      clientId = client.clientId;
      oauth = createOAuthClient({ baseUrl: server.baseUrl, clientId, clientSecret: client.clientSecret });
    });
    after(() => server.close());

    /** The person approves `url` in a browser; returns the callback's query. */
    const approve = async (url: string) =>
      (await signInAndConsent(new Browser(server.baseUrl), new URL(url), person)).searchParams;

    test('discovery and keys: the issuer and the endpoints the SDK uses', async () => {
      const configuration = await oauth.getOpenIdConfiguration();
      assert.equal(configuration.issuer, `${server.baseUrl}/integration/v1/oauth2`);
      assert.equal(configuration.token_endpoint, `${configuration.issuer}/token`);
      assert.ok(configuration.code_challenge_methods_supported.includes('S256'));
      const { keys } = await oauth.getJwks();
      assert.ok(keys.length > 0);
      assert.ok(keys.every((key) => key.kty === 'RSA' && typeof key.kid === 'string'));
    });

    test('authorization code with PKCE: the URL, the person’s approval, the code exchanged, userinfo', async () => {
      const { url, codeVerifier, state } = oauth.authorizationUrl({
        redirectUri: REDIRECT_URI,
        scope: 'openid profile email',
      });
      const query = new URL(url).searchParams;
      assert.equal(query.get('code_challenge_method'), 'S256');
      assert.equal(query.get('client_id'), clientId);
      assert.match(codeVerifier, /^[\w-]{43}$/);
      assert.match(state, /^[\w-]{43}$/);
      const callback = await approve(url);
      assert.equal(callback.get('state'), state, 'the callback carries the state');
      const tokens = await oauth.exchangeCode({
        code: callback.get('code') ?? '',
        codeVerifier,
        redirectUri: REDIRECT_URI,
      });
      assert.equal(tokens.token_type, 'Bearer');
      assert.ok(tokens.refresh_token !== undefined && tokens.id_token !== undefined);
      const claims = await oauth.getUserInfo(tokens.access_token);
      assert.equal(claims.name, 'Ann Admin');
      assert.equal(claims.email, person.email);

      // A code is spent by its first use: OAuth 2's error, with its description as the message.
      const spent = await apiError(
        oauth.exchangeCode({ code: callback.get('code') ?? '', codeVerifier, redirectUri: REDIRECT_URI }),
      );
      assert.equal(spent.status, 400);
      assert.equal(spent.code, 'invalid_grant');
      assert.notEqual(spent.message, 'HTTP 400');
    });

    test('a wrong verifier is refused, and the state a caller gives is the one sent', async () => {
      const { url, state } = oauth.authorizationUrl({
        redirectUri: REDIRECT_URI,
        scope: 'openid',
        state: 'my-state',
      });
      assert.equal(state, 'my-state');
      const callback = await approve(url);
      assert.equal(callback.get('state'), 'my-state');
      const wrong = oauth.authorizationUrl({ redirectUri: REDIRECT_URI, scope: 'openid' }).codeVerifier;
      const error = await apiError(
        oauth.exchangeCode({
          code: callback.get('code') ?? '',
          codeVerifier: wrong,
          redirectUri: REDIRECT_URI,
        }),
      );
      assert.equal(error.code, 'invalid_grant');
    });

    test('a pushed authorization request: a URL with only client_id and request_uri, which works', async () => {
      const { url, codeVerifier, state, expiresIn } = await oauth.pushAuthorizationRequest({
        redirectUri: REDIRECT_URI,
        scope: 'openid incidents:read',
      });
      assert.ok(expiresIn > 0);
      assert.deepEqual([...new URL(url).searchParams.keys()].sort(), ['client_id', 'request_uri']);
      const callback = await approve(url);
      assert.equal(callback.get('state'), state);
      const tokens = await oauth.exchangeCode({
        code: callback.get('code') ?? '',
        codeVerifier,
        redirectUri: REDIRECT_URI,
      });
      assert.equal(tokens.scope, 'openid incidents:read');
    });

    test('refresh rotates the refresh token; the spent one is refused; revoking ends the grant', async () => {
      const { url, codeVerifier } = oauth.authorizationUrl({
        redirectUri: REDIRECT_URI,
        scope: 'openid incidents:read',
      });
      const callback = await approve(url);
      const first = await oauth.exchangeCode({
        code: callback.get('code') ?? '',
        codeVerifier,
        redirectUri: REDIRECT_URI,
      });
      assert.ok(first.refresh_token !== undefined);
      const second = await oauth.refreshToken(first.refresh_token);
      assert.ok(second.refresh_token !== undefined && second.refresh_token !== first.refresh_token);
      const wider = createClient({ baseUrl: server.baseUrl, accessToken: second.access_token });
      assert.equal((await wider.listIncidentsPaged({ limit: 1 })).data.pagination.totalRecords, INCIDENTS);

      await oauth.revokeToken(second.refresh_token, { tokenTypeHint: 'refresh_token' });
      // Revoking again, or an unknown token: the same answer.
      await oauth.revokeToken(second.refresh_token);
      const ended = await apiError(wider.listIncidentsPaged());
      assert.ok(ended instanceof AuthenticationError);
      assert.equal((await apiError(oauth.refreshToken(second.refresh_token))).code, 'invalid_grant');
    });

    test('a wrong client secret is an AuthenticationError (invalid_client)', async () => {
      const impostor = createOAuthClient({
        baseUrl: server.baseUrl,
        clientId,
        clientSecret: 'not-the-secret',
      });
      const error = await apiError(impostor.clientCredentialsToken());
      assert.ok(error instanceof AuthenticationError);
      assert.equal(error.code, 'invalid_client');
    });

    test('a public client: no secret, the code flow with PKCE alone', async () => {
      const { clientId: publicId } = await seedClient(server.ctx.db, accountId, true);
      const app = createOAuthClient({ baseUrl: server.baseUrl, clientId: publicId });
      const { url, codeVerifier } = app.authorizationUrl({
        redirectUri: REDIRECT_URI,
        scope: 'openid profile',
      });
      const callback = await approve(url);
      const tokens = await app.exchangeCode({
        code: callback.get('code') ?? '',
        codeVerifier,
        redirectUri: REDIRECT_URI,
      });
      assert.equal((await app.getUserInfo(tokens.access_token)).name, 'Ann Admin');
      assert.ok(tokens.refresh_token !== undefined);
      assert.ok((await app.refreshToken(tokens.refresh_token)).access_token !== tokens.access_token);
    });

    test('the sign-out URL names the client and answers the browser', async () => {
      const url = oauth.endSessionUrl({ state: 'bye' });
      assert.equal(new URL(url).searchParams.get('client_id'), clientId);
      const page = await new Browser(server.baseUrl).request(url);
      assert.equal(page.status, 200);
    });

    test('the wider API with a client-credentials token: pages, every record once, and the requests it takes', async () => {
      const tokens = await oauth.clientCredentialsToken({ scope: DATA_SCOPES });
      const paths: string[] = [];
      const wider = createClient({
        baseUrl: server.baseUrl,
        accessToken: tokens.access_token,
        fetch: async (request: Request) => {
          const { pathname, search } = new URL(request.url);
          paths.push(`${pathname}${search}`);
          return fetch(request);
        },
      });
      const page = await wider.listIncidentsPaged({ start: 20, limit: 20 });
      assert.deepEqual(page.data.pagination, {
        totalRecords: INCIDENTS,
        perPage: 20,
        totalPages: 3,
        start: 20,
        currentPage: 2,
      });
      assert.deepEqual(
        page.data.response.map((row) => row.incident_number),
        incidentNumbers.slice(20, 40),
      );
      assert.ok(page.rateLimit !== null && page.rateLimit.limit === 10_000);
      assert.match(page.requestId ?? '', /./);

      paths.length = 0;
      const walked: string[] = [];
      for await (const incident of wider.incidentsPaged()) walked.push(incident.incident_number);
      assert.deepEqual(walked, incidentNumbers);
      assert.deepEqual(paths, ['/api/v1/incidents?_start=0&_limit=100'], 'one request at the largest page');

      paths.length = 0;
      walked.length = 0;
      for await (const incident of wider.incidentsPaged({ limit: 20 })) walked.push(incident.incident_number);
      assert.deepEqual(walked, incidentNumbers);
      assert.deepEqual(
        paths,
        [0, 20, 40].map((start) => `/api/v1/incidents?_start=${start}&_limit=20`),
      );

      const users = [];
      for await (const user of wider.usersPaged()) users.push(user.name);
      assert.deepEqual(users, ['Ann Admin']);
      assert.deepEqual(
        (await wider.listUsersPaged()).data.response.map((user) => user.name),
        ['Ann Admin'],
      );
      assert.equal((await wider.listDepartmentsPaged()).data.pagination.totalRecords, 0);
      assert.equal((await wider.listLocationsPaged()).data.pagination.totalRecords, 0);
      for await (const record of wider.departmentsPaged()) assert.fail(`no department, got ${record.id}`);
      for await (const record of wider.locationsPaged()) assert.fail(`no location, got ${record.id}`);
    });

    test('a token without a list’s scope is a PermissionError; the other API’s credential is a TypeError', async () => {
      const tokens = await oauth.clientCredentialsToken({ scope: 'users:read' });
      const wider = createClient({ baseUrl: server.baseUrl, accessToken: tokens.access_token });
      assert.ok((await apiError(wider.listIncidentsPaged())) instanceof PermissionError);
      await assert.rejects(wider.listIncidents(), {
        name: 'TypeError',
        message: 'this call is to the public API: create the client with an apiKey (svc_…)',
      });
      await assert.rejects(wider.exportIncidents(), { name: 'TypeError' });
      const keyOnly = createClient({ baseUrl: server.baseUrl, apiKey: 'svc_' + '0'.repeat(40) });
      await assert.rejects(keyOnly.usersPaged().next(), {
        name: 'TypeError',
        message: 'this call is to the wider API: create the client with an accessToken (OAuth 2)',
      });
      assert.throws(() => createClient({ baseUrl: server.baseUrl } as never), {
        name: 'TypeError',
        message: 'apiKey (svc_…, for the public API) or accessToken (OAuth 2, for the wider API) is required',
      });
    });

    test('the probes: liveness and readiness, without a credential', async () => {
      const headers: (string | null)[] = [];
      const client = createClient({
        baseUrl: server.baseUrl,
        apiKey: 'svc_' + '0'.repeat(40),
        fetch: async (request: Request) => {
          headers.push(request.headers.get('authorization'));
          return fetch(request);
        },
      });
      const live = await client.checkLiveness();
      assert.deepEqual(live.data, { status: 'ok' });
      assert.equal(live.rateLimit, null);
      const ready = await client.checkReadiness();
      assert.equal(ready.data.status, 'ready');
      assert.equal(ready.data.database, 'up');
      assert.deepEqual(headers, [null, null], 'no credential sent');
    });
  });
}

describe('SDK: what is sent once', () => {
  test('readiness: a 503 report is the answer, asked once', async () => {
    let requests = 0;
    const client = createClient({
      baseUrl: 'http://127.0.0.1:9',
      apiKey: 'svc_' + '0'.repeat(40),
      fetch: async () => {
        requests += 1;
        return Response.json({ status: 'unavailable', database: 'down', redis: 'up' }, { status: 503 });
      },
    });
    const { data } = await client.checkReadiness();
    assert.deepEqual(data, { status: 'unavailable', database: 'down', redis: 'up' });
    assert.equal(requests, 1);
  });

  test('a token request that fails on the network is not sent again: its code may be spent', async () => {
    let requests = 0;
    const oauth = createOAuthClient({
      baseUrl: 'http://127.0.0.1:9',
      clientId: 'app',
      clientSecret: 'secret',
      fetch: async () => {
        requests += 1;
        throw new TypeError('fetch failed');
      },
    });
    await assert.rejects(oauth.exchangeCode({ code: 'c', codeVerifier: 'v', redirectUri: REDIRECT_URI }), {
      name: 'TypeError',
    });
    assert.equal(requests, 1);
  });
});
