import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import * as oidc from 'openid-client';
import { OAUTH_PATH } from '../../src/paths.ts';
import { bearer, STORES, seedAccount, seedIncidents, seedKey } from '../helpers.ts';
import {
  authorizationRequest,
  Browser,
  discover,
  type OauthServer,
  PASSWORD,
  REDIRECT_URI,
  seedClient,
  seedUser,
  signInAndConsent,
  startOauthServer,
} from '../oauth/harness.ts';
import { DocumentCheck } from './document-check.ts';

/**
 * Every operation of /openapi.json walked against the real server, with valid credentials and
 * without, each answer checked against the document (status, headers, body): the public API with
 * its exports and feed, the wider API, the OAuth endpoints and the probes. The answers that are
 * not operations (write methods) are checked against what `info.description` says of them, and
 * the last test fails if any documented operation went unanswered.
 */

const WRITE_METHODS = ['POST', 'PUT', 'PATCH', 'DELETE'] as const;
const T = '2026-01-01T00:00:00.000Z';
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
/** Over the 1 MiB any request body may have (src/errors.ts). */
const TOO_LARGE = 'x'.repeat(1024 * 1024 + 1);

const oauth = (path: string) => `${OAUTH_PATH}${path}`;

const basic = (clientId: string, secret: string) => ({
  authorization: `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`).toString('base64')}`,
});

/** A fresh PKCE pair (RFC 7636, S256). */
function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

for (const store of STORES) {
  describe(`responses match the OpenAPI document (${store})`, () => {
    let server: OauthServer;
    let check: DocumentCheck;
    let readKey: string;
    let writeKey: string;
    let token: string;
    let narrowToken: string;
    let incidentId: string;
    let client: { clientId: string; secret: string };
    let user: { id: string; email: string };

    before(async () => {
      server = await startOauthServer(store);
      const { db, app } = server.ctx;
      const accountId = await seedAccount(db);
      readKey = (await seedKey(db, accountId)).rawKey;
      writeKey = (await seedKey(db, accountId, { scope: 'read-write' })).rawKey;
      user = await seedUser(db, accountId, { name: 'Amara Okafor', department: 'Operations' });
      await seedUser(db, accountId, { name: 'Ben Ode', department: null });
      for (const table of ['departments', 'locations'] as const) {
        await db
          .insertInto(table)
          .values({
            id: randomUUID(),
            account_id: accountId,
            name: 'Warehouse North',
            active: 1,
            created_at: T,
          })
          .execute();
      }
      // Null and filled optional fields both, and each status seen in data.
      const statuses = ['open', 'under_investigation', 'action_required', 'resolved', 'closed'];
      const rows = await seedIncidents(db, accountId, 5, (i) => ({
        status: statuses[i],
        description: i % 2 === 0 ? null : 'Slip on wet floor near the loading bay',
        location: i % 2 === 0 ? null : 'Warehouse North',
        incident_date: i % 2 === 0 ? null : '2025-01-01',
        severity_likelihood: i === 0 ? null : 2,
      }));
      incidentId = rows[0]!.id;

      const seeded = await seedClient(db, accountId);
      assert.ok(seeded.clientSecret !== null);
      client = { clientId: seeded.clientId, secret: seeded.clientSecret };
      const config = await discover(server, client.clientId, client.secret);
      const grant = (scope: string) => oidc.clientCredentialsGrant(config, { scope });
      token = (await grant('users:read departments:read locations:read incidents:read')).access_token;
      narrowToken = (await grant('users:read')).access_token;
      check = await DocumentCheck.of(app);
    });
    after(() => server.close());

    const send = async (
      method: string,
      url: string,
      headers: Record<string, string> = {},
      payload?: string,
    ) => {
      const res = await server.ctx.app.inject({ method, url, headers, payload });
      check.check(method, url, res);
      return res;
    };
    const postForm = (url: string, form: Record<string, string>, headers: Record<string, string> = {}) =>
      send('POST', url, { ...FORM, ...headers }, new URLSearchParams(form).toString());
    const clientAuth = () => basic(client.clientId, client.secret);
    const wrongClientAuth = () => basic(client.clientId, `${client.secret}x`);

    test('public API: 200 with data and 304 for every read, 404 for an unknown incident', async () => {
      for (const url of [
        '/api/v1/public/incidents',
        '/api/v1/public/incidents?page=2&limit=2',
        `/api/v1/public/incidents/${incidentId}`,
        '/api/v1/public/users',
        '/api/v1/public/departments',
        '/api/v1/public/locations',
      ]) {
        const ok = await send('GET', url, bearer(readKey));
        assert.equal(ok.statusCode, 200, url);
        assert.notDeepEqual(ok.json().data, [], url);
        const etag = String(ok.headers.etag);
        assert.equal((await send('GET', url, { ...bearer(readKey), 'if-none-match': etag })).statusCode, 304);
      }
      for (const id of [randomUUID(), 'not-a-uuid']) {
        const missing = await send('GET', `/api/v1/public/incidents/${id}`, bearer(readKey));
        assert.equal(missing.statusCode, 404);
      }
    });

    test('public API: 401 for a missing or unknown key, 403 for a plan without API access', async () => {
      assert.equal((await send('GET', '/api/v1/public/users')).statusCode, 401);
      const unknown = `svc_${'0'.repeat(40)}`;
      assert.equal((await send('GET', '/api/v1/public/incidents', bearer(unknown))).statusCode, 401);
      const { db } = server.ctx;
      const planlessAccount = await seedAccount(db);
      const planless = await seedKey(db, planlessAccount);
      // Keys are made while the plan allows them; the plan changing later is what this 403 is for.
      await db.updateTable('accounts').set({ api_access: 0 }).where('id', '=', planlessAccount).execute();
      assert.equal((await send('GET', '/api/v1/public/locations', bearer(planless.rawKey))).statusCode, 403);
      assert.equal(
        (await send('GET', '/api/v1/public/exports/users.csv', bearer(planless.rawKey))).statusCode,
        403,
      );
    });

    test('exports: every export, plain and gzip, with the feed position and the records', async () => {
      const exports = check.operations().filter(({ path }) => path.startsWith('/api/v1/public/exports/'));
      assert.equal(exports.length, 8);
      for (const { path } of exports) {
        const plain = await send('GET', path, bearer(readKey));
        assert.equal(plain.statusCode, 200, path);
        assert.ok(plain.body.length > 0, path);
        const zipped = await send('GET', path, { ...bearer(readKey), 'accept-encoding': 'gzip' });
        assert.equal(zipped.statusCode, 200, path);
        assert.equal(zipped.headers['content-encoding'], 'gzip', path);
      }
    });

    test('public API: 429 once the allowance is used up', async () => {
      const key = await seedKey(server.ctx.db, await seedAccount(server.ctx.db, { rate_limit_per_hour: 1 }));
      assert.equal((await send('GET', '/api/v1/public/departments', bearer(key.rawKey))).statusCode, 200);
      assert.equal((await send('GET', '/api/v1/public/incidents', bearer(key.rawKey))).statusCode, 429);
      const exported = await send('GET', '/api/v1/public/exports/incidents.ndjson', bearer(key.rawKey));
      assert.equal(exported.statusCode, 429);
    });

    test('changes feed: 200 with changes and at the head, 400 for a garbled cursor, 410 for an expired one', async () => {
      const url = '/api/v1/public/changes';
      const first = await send('GET', `${url}?limit=3`, bearer(readKey));
      assert.equal(first.statusCode, 200);
      assert.notDeepEqual(first.json().data.data, []);
      assert.equal((await send('GET', `${url}?cursor=latest`, bearer(readKey))).statusCode, 200);
      assert.equal((await send('GET', `${url}?cursor=garbled`, bearer(readKey))).statusCode, 400);
      const { db } = server.ctx;
      const purged = await seedAccount(db);
      const key = await seedKey(db, purged);
      await seedIncidents(db, purged, 2);
      const early = (await send('GET', `${url}?limit=1`, bearer(key.rawKey))).json().data.next_cursor;
      await db.updateTable('accounts').set({ changes_purged_seq: 2 }).where('id', '=', purged).execute();
      assert.equal((await send('GET', `${url}?cursor=${early}`, bearer(key.rawKey))).statusCode, 410);
    });

    test('wider API: 200 with data, 400, 401 and 403 on every list', async () => {
      for (const resource of ['users', 'departments', 'locations', 'incidents']) {
        const url = `/api/v1/${resource}`;
        const ok = await send('GET', `${url}?_start=0&_limit=2`, bearer(token));
        assert.equal(ok.statusCode, 200);
        assert.notDeepEqual(ok.json().response, []);
        assert.equal((await send('GET', `${url}?_limit=0`, bearer(token))).statusCode, 400);
        assert.equal((await send('GET', url)).statusCode, 401);
        assert.equal((await send('GET', url, bearer(readKey))).statusCode, 401);
        if (resource !== 'users') assert.equal((await send('GET', url, bearer(narrowToken))).statusCode, 403);
      }
    });

    test('wider API: 429 once the OAuth client has used up the allowance', async () => {
      const { db } = server.ctx;
      const limited = await seedAccount(db, { rate_limit_per_hour: 1 });
      const limitedClient = await seedClient(db, limited);
      const config = await discover(server, limitedClient.clientId, limitedClient.clientSecret);
      const own = (await oidc.clientCredentialsGrant(config, { scope: 'users:read' })).access_token;
      assert.equal((await send('GET', '/api/v1/users', bearer(own))).statusCode, 200);
      assert.equal((await send('GET', '/api/v1/users', bearer(own))).statusCode, 429);
    });

    test('write methods, which are not operations, answer as info.description says', async () => {
      const description = String(check.at('/info/description'));
      for (const promise of ['`INSUFFICIENT_SCOPE`', '405', '`Allow: GET, HEAD`', '`Error`']) {
        assert.ok(description.includes(promise), promise);
      }
      const paths = check
        .operations()
        .filter(({ path }) => path.startsWith('/api/v1/'))
        .map(({ path }) => path.replace('{id}', incidentId));
      for (const url of paths) {
        const isPublic = url.startsWith('/api/v1/public/');
        for (const method of WRITE_METHODS) {
          const what = `${method} ${url}`;
          assert.equal(
            check.at(`/paths/${check.pathOf(url).replaceAll('/', '~1')}/${method.toLowerCase()}`),
            undefined,
          );
          const refused = await server.ctx.app.inject({
            method,
            url,
            headers: bearer(isPublic ? writeKey : token),
          });
          assert.equal(refused.statusCode, 405, what);
          assert.equal(refused.headers.allow, 'GET, HEAD', what);
          assert.ok(refused.headers['x-ratelimit-remaining'] !== undefined, what);
          check.checkComponent('Error', refused.json(), what);
          if (isPublic) {
            const scoped = await server.ctx.app.inject({ method, url, headers: bearer(readKey) });
            assert.equal(scoped.statusCode, 403, what);
            assert.equal(scoped.json().error, 'INSUFFICIENT_SCOPE', what);
            check.checkComponent('CodedError', scoped.json(), what);
          }
        }
      }
    });

    test('a documented bound never refuses a value the server serves', async () => {
      let probed = 0;
      for (const { path, operation } of check.operations()) {
        if (!path.startsWith('/api/v1/')) continue;
        const credential = bearer(path.startsWith('/api/v1/public/') ? readKey : token);
        const parameters = Array.isArray(operation.parameters) ? operation.parameters : [];
        for (const [index, parameter] of parameters.entries()) {
          if (parameter.schema?.type !== 'integer') continue;
          const schema = `/paths/${path.replaceAll('/', '~1')}/get/parameters/${index}/schema`;
          for (const value of [-1, 0, 1, 2, 99, 100, 101, 200, 201, 1000, 1001, 1_000_000]) {
            const url = `${path.replace('{id}', incidentId)}?${parameter.name}=${value}`;
            const res = await send('GET', url, credential);
            if (res.statusCode !== 200) continue;
            probed += 1;
            assert.ok(check.accepts(schema, value), `${url} is served, but the document refuses ${value}`);
          }
        }
      }
      assert.ok(probed > 0);
    });

    test('a request body over 1 MiB is 413 on every surface', async () => {
      for (const [url, headers] of [
        ['/healthz', {}],
        ['/api/v1/public/users', bearer(readKey)],
        ['/api/v1/users', bearer(token)],
        [oauth('/jwks'), {}],
      ] as const) {
        const res = await send('GET', url, { ...headers, 'content-type': 'text/plain' }, TOO_LARGE);
        assert.equal(res.statusCode, 413, url);
      }
    });

    test('health: both probes', async () => {
      assert.equal((await send('GET', '/healthz')).statusCode, 200);
      assert.equal((await send('GET', '/readyz')).statusCode, 200);
    });

    test('OAuth: discovery, keys, authorization requests (plain and pushed) and sign-out', async () => {
      const discovery = await send('GET', oauth('/.well-known/openid-configuration'));
      assert.equal(discovery.statusCode, 200);
      assert.equal((await send('GET', oauth('/jwks'))).statusCode, 200);

      const { challenge } = pkce();
      const request = {
        response_type: 'code',
        client_id: client.clientId,
        redirect_uri: REDIRECT_URI,
        scope: 'openid users:read',
        code_challenge: challenge,
        code_challenge_method: 'S256',
        state: 'xyz',
      };
      const authorize = (query: Record<string, string>) =>
        send('GET', `${oauth('/authorize')}?${new URLSearchParams(query)}`);
      const toSignIn = await authorize(request);
      assert.equal(toSignIn.statusCode, 303);
      assert.match(String(toSignIn.headers.location), /\/interaction\//);
      // Nobody is signed in: the error goes back to the client, in a page that posts it.
      const formPost = await authorize({ ...request, prompt: 'none', response_mode: 'form_post' });
      assert.equal(formPost.statusCode, 400);
      assert.match(formPost.body, /name="error" value="login_required"/);
      assert.equal((await authorize({ ...request, client_id: 'unknown' })).statusCode, 400);

      const pushed = await postForm(oauth('/request'), request, clientAuth());
      assert.equal(pushed.statusCode, 201);
      const { request_uri: requestUri } = pushed.json();
      const resumed = await authorize({ client_id: client.clientId, request_uri: requestUri });
      assert.equal(resumed.statusCode, 303);
      const withoutPkce = { ...request, code_challenge: '', code_challenge_method: '' };
      assert.equal((await postForm(oauth('/request'), withoutPkce, clientAuth())).statusCode, 400);
      assert.equal((await postForm(oauth('/request'), request, wrongClientAuth())).statusCode, 401);

      assert.equal((await send('GET', oauth('/session/end'))).statusCode, 200);
      const badHint = `${oauth('/session/end')}?id_token_hint=not-a-token`;
      for (const accept of ['text/html', 'application/json']) {
        const refused = await send('GET', badHint, { accept });
        assert.equal(refused.statusCode, 400);
        assert.match(String(refused.headers['content-type']), new RegExp(`^${accept}`));
      }
    });

    test('OAuth: tokens by every grant, refresh, userinfo and revocation', async () => {
      const config = await discover(server, client.clientId, client.secret);
      const { url, verifier } = await authorizationRequest(config, {
        scope: 'openid profile email employment users:read',
      });
      const browser = new Browser(server.baseUrl);
      const callback = await signInAndConsent(browser, url, { email: user.email, password: PASSWORD });
      const code = callback.searchParams.get('code');
      assert.ok(code, callback.href);

      // Signed in, with the scopes granted: the code comes at once, in a page that posts it.
      const session = ['safety_oauth_session', 'safety_oauth_session.sig']
        .map((name) => `${name}=${browser.cookie(name)}`)
        .join('; ');
      const again = new URL(url);
      again.searchParams.set('response_mode', 'form_post');
      again.searchParams.set('code_challenge', pkce().challenge);
      const posted = await send('GET', `${again.pathname}${again.search}`, { cookie: session });
      assert.equal(posted.statusCode, 200);
      assert.match(posted.body, /name="code"/);
      const issued = await postForm(
        oauth('/token'),
        { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, code_verifier: verifier },
        clientAuth(),
      );
      assert.equal(issued.statusCode, 200);
      const tokens = issued.json();
      assert.ok(tokens.refresh_token && tokens.id_token);

      const credentials = { grant_type: 'client_credentials', scope: 'users:read' };
      assert.equal((await postForm(oauth('/token'), credentials, clientAuth())).statusCode, 200);
      assert.equal((await postForm(oauth('/token'), credentials, wrongClientAuth())).statusCode, 401);
      const unsupported = await postForm(oauth('/token'), { grant_type: 'password' }, clientAuth());
      assert.equal(unsupported.statusCode, 400);

      const refreshed = await postForm(
        oauth('/token/refresh'),
        { refresh_token: tokens.refresh_token },
        clientAuth(),
      );
      assert.equal(refreshed.statusCode, 200);
      const { access_token: accessToken, refresh_token: refreshToken } = refreshed.json();
      const spent = { refresh_token: 'not-a-refresh-token' };
      assert.equal((await postForm(oauth('/token/refresh'), spent, clientAuth())).statusCode, 400);
      assert.equal((await postForm(oauth('/token/refresh'), spent, wrongClientAuth())).statusCode, 401);

      const info = await send('GET', oauth('/userinfo'), bearer(accessToken));
      assert.equal(info.statusCode, 200);
      assert.equal(info.json().sub, user.id);
      assert.equal((await send('GET', oauth('/userinfo'))).statusCode, 401);
      assert.equal((await postForm(oauth('/userinfo'), { access_token: accessToken })).statusCode, 200);
      const twice = await postForm(oauth('/userinfo'), { access_token: accessToken }, bearer(accessToken));
      assert.equal(twice.statusCode, 400);

      assert.equal((await postForm(oauth('/revoke'), { token: refreshToken }, clientAuth())).statusCode, 200);
      assert.equal((await postForm(oauth('/revoke'), {}, clientAuth())).statusCode, 400);
      assert.equal(
        (await postForm(oauth('/revoke'), { token: refreshToken }, wrongClientAuth())).statusCode,
        401,
      );
      assert.equal((await send('GET', oauth('/userinfo'), bearer(accessToken))).statusCode, 401);
    });

    test('every documented operation was answered and checked', () => {
      const answered = new Set([...check.seen].map((seen) => seen.split(' ')[0]));
      assert.deepEqual(
        check.operationIds().filter((id) => !answered.has(id)),
        [],
      );
    });
  });
}
