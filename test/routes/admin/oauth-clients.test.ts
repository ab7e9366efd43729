import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { oauthClientRepository } from '../../../src/db/repositories/oauth-clients.ts';
import { kyselyAdapter } from '../../../src/oauth/adapter.ts';
import { oauthClientService } from '../../../src/services/oauth-client-service.ts';
import { OAUTH_PATH } from '../../../src/paths.ts';
import { bearer, createTestContext, STORES, seedAccount, type TestContext } from '../../helpers.ts';
import { AdminClient, seedUser } from './admin-helpers.ts';
import { type AdminRouteTable, describeAdminRouteAccess } from './route-access.ts';

const INTEGRATIONS = '/admin/settings/integrations';
const CLIENTS = '/admin/settings/integrations/oauth-clients';
const CLIENT_SECRET = /ocs_[0-9a-f]{64}/g;

/** The value of the read-only field with this id, as the one-time display shows it. */
function fieldValue(page: string, id: string): string | undefined {
  return new RegExp(`<input id="${id}" class="key-value" type="text" readonly value="([^"]*)"`).exec(
    page,
  )?.[1];
}

for (const store of STORES) {
  describe(`admin OAuth client pages (${store})`, () => {
    let ctx: TestContext;
    let accountId: string;
    let client: AdminClient;

    before(async () => {
      ctx = await createTestContext(store);
      accountId = await seedAccount(ctx.db);
      const admin = await seedUser(ctx.db, accountId);
      client = new AdminClient(ctx.app);
      assert.equal((await client.signIn(admin.email)).statusCode, 303);
    });
    after(() => ctx.close());

    /** Submits the create form of Settings > Integrations; returns the page the redirect leads to. */
    async function register(form: Record<string, string>): Promise<LightMyRequestResponse> {
      const before = await client.get(INTEGRATIONS);
      const res = await client.submit(before.body, CLIENTS, form);
      assert.equal(res.statusCode, 303);
      assert.equal(res.headers.location, INTEGRATIONS);
      return client.get(INTEGRATIONS);
    }

    /** A client-credentials token request, as a partner's server job makes it. */
    function tokenRequest(clientId: string, secret: string) {
      return ctx.app.inject({
        method: 'POST',
        url: `${OAUTH_PATH}/token`,
        headers: {
          authorization: `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        payload: 'grant_type=client_credentials&scope=users%3Aread',
      });
    }

    async function registerConfidential(name: string): Promise<{ clientId: string; secret: string }> {
      const page = (await register({ name, redirect_uris: 'https://app.example/cb', type: 'confidential' }))
        .body;
      const clientId = fieldValue(page, 'new-client-id');
      const secret = fieldValue(page, 'new-client-secret');
      assert.ok(clientId !== undefined && secret !== undefined);
      return { clientId, secret };
    }

    test('a confidential client: id and secret shown once, only the hash stored, and the secret gets tokens', async () => {
      const page = await register({
        name: 'Acme BI',
        redirect_uris: ' https://bi.acme.example/oauth/callback \r\n\r\nhttp://localhost:8080/cb\r\n',
        type: 'confidential',
      });
      assert.match(page.body, /OAuth client “Acme BI” registered/);
      assert.match(page.body, /Copy this client secret now\. It will not be shown again:/);
      assert.match(page.headers['cache-control'] as string, /no-store/);
      assert.match(page.headers['content-security-policy'] as string, /frame-ancestors 'none'/);
      assert.equal(page.headers['x-frame-options'], 'DENY');
      const clientId = fieldValue(page.body, 'new-client-id');
      const secret = fieldValue(page.body, 'new-client-secret');
      assert.match(clientId ?? '', /^oc_[0-9a-f]{32}$/);
      assert.match(secret ?? '', /^ocs_[0-9a-f]{64}$/);
      assert.equal(page.body.match(CLIENT_SECRET)?.length, 1, 'the secret is on the page once');

      const row = await oauthClientRepository.findById(ctx.db, clientId as string);
      assert.equal(row?.account_id, accountId);
      assert.equal(row?.is_public, 0);
      assert.equal(
        row?.secret_hash,
        createHash('sha256')
          .update(secret as string)
          .digest('hex'),
      );
      assert.ok(!JSON.stringify(row).includes(secret as string), 'the raw secret is not stored');
      assert.deepEqual(JSON.parse(row?.redirect_uris ?? ''), [
        'https://bi.acme.example/oauth/callback',
        'http://localhost:8080/cb',
      ]);

      const reload = (await client.get(INTEGRATIONS)).body;
      assert.equal(reload.match(CLIENT_SECRET), null, 'a reload does not show the secret');
      assert.equal(fieldValue(reload, 'new-client-id'), undefined);
      const start = reload.indexOf(`data-client-id="${clientId}"`);
      assert.ok(start > 0, 'the client is listed');
      const listed = reload.slice(start, reload.indexOf('</tr>', start));
      assert.match(listed, /data-label="Name">Acme BI</);
      assert.match(listed, /data-label="Type">Confidential</);
      assert.match(
        listed,
        /<code>https:\/\/bi\.acme\.example\/oauth\/callback<\/code><br><code>http:\/\/localhost:8080\/cb<\/code>/,
      );
      assert.match(listed, new RegExp(`href="${CLIENTS}/${clientId}/delete"`));

      const token = await tokenRequest(clientId as string, secret as string);
      assert.equal(token.statusCode, 200, token.body);
      const { access_token: accessToken } = token.json();
      const users = await ctx.app.inject({
        method: 'GET',
        url: '/api/v1/users',
        headers: bearer(accessToken),
      });
      assert.equal(users.statusCode, 200);
      assert.equal((await tokenRequest(clientId as string, `${secret}x`)).statusCode, 401);
    });

    test('a public client: id shown, no secret stored or shown, and no client-credentials tokens', async () => {
      const page = (
        await register({ name: 'Field app', redirect_uris: 'https://m.example/cb', type: 'public' })
      ).body;
      assert.match(page, /Public OAuth client “Field app” registered: it has no secret/);
      assert.doesNotMatch(page, /It will not be shown again/);
      assert.equal(fieldValue(page, 'new-client-secret'), undefined);
      const clientId = fieldValue(page, 'new-client-id') as string;
      const row = await oauthClientRepository.findById(ctx.db, clientId);
      assert.equal(row?.is_public, 1);
      assert.equal(row?.secret_hash, null);
      const listed = (await client.get(INTEGRATIONS)).body;
      const start = listed.indexOf(`data-client-id="${clientId}"`);
      assert.match(listed.slice(start, listed.indexOf('</tr>', start)), /Public \(PKCE, no secret\)/);
      assert.notEqual((await tokenRequest(clientId, '')).statusCode, 200);
    });

    test('bad input is shown as a message and registers nothing', async () => {
      const count = async () => (await oauthClientService.list(ctx.db, accountId)).length;
      const before = await count();
      const cases: [Record<string, string>, RegExp][] = [
        [
          { name: '  ', redirect_uris: 'https://ok.example/cb', type: 'confidential' },
          /The OAuth client was not registered: the client name must be 1 to 100 characters\./,
        ],
        [
          {
            name: 'Plain http',
            redirect_uris: 'https://ok.example/cb\nhttp://evil.example/cb',
            type: 'confidential',
          },
          /redirect URI &quot;http:\/\/evil\.example\/cb&quot; must use https \(http only for localhost\)/,
        ],
        [
          { name: 'Relative', redirect_uris: '/callback', type: 'public' },
          /redirect URI &quot;\/callback&quot; is not an absolute URL/,
        ],
        [
          { name: 'Fragment', redirect_uris: 'https://ok.example/cb#x', type: 'public' },
          /must not contain a fragment/,
        ],
        [{ name: 'No URIs', redirect_uris: ' \n ', type: 'public' }, /at least one redirect URI is required/],
        [
          { name: 'No type', redirect_uris: 'https://ok.example/cb', type: 'secret' },
          /choose a client type: confidential or public/,
        ],
        [
          { name: '<script>alert(1)</script>', redirect_uris: 'javascript:alert(1)', type: 'public' },
          /redirect URI &quot;javascript:alert\(1\)&quot; must use https/,
        ],
        [
          { name: 'Partner\u0000App', redirect_uris: 'https://ok.example/cb', type: 'public' },
          /The OAuth client was not registered: the client name must not contain the NUL character \(\\u0000\)\./,
        ],
      ];
      for (const [form, message] of cases) {
        const page = (await register(form)).body;
        assert.match(page, message);
        assert.match(page, /class="flash flash-error" role="alert"/);
      }
      const form = (await client.get(INTEGRATIONS)).body;
      const lone = await client.submitJson(form, CLIENTS, {
        name: 'Partner\ud800App',
        redirect_uris: 'https://ok.example/cb',
        type: 'public',
      });
      assert.equal(lone.statusCode, 303);
      assert.match(
        (await client.get(INTEGRATIONS)).body,
        /The OAuth client was not registered: the client name must be valid Unicode: it holds a lone surrogate \(\\ud800–\\udfff\)\./,
      );
      assert.equal(await count(), before);
    });

    test('a client or grant id no store can hold is not found, as any unknown one is', async () => {
      const missing = await client.get(`${CLIENTS}/%00`);
      assert.equal(missing.statusCode, 404);
      assert.match(missing.body, /This account has no OAuth client with that id\./);
      assert.equal((await client.get(`${CLIENTS}/%00/delete`)).statusCode, 404);
      const page = (await client.get(INTEGRATIONS)).body;
      const deleted = await client.submit(page, `${CLIENTS}/%00/delete`);
      assert.equal(deleted.statusCode, 303);
      assert.equal(deleted.headers.location, INTEGRATIONS);
      assert.match((await client.get(INTEGRATIONS)).body, /Nothing was changed: no OAuth client with id/);

      const { clientId } = await registerConfidential('Grantless');
      const revoked = await client.submit(page, `${CLIENTS}/${clientId}/grants/%00/revoke`);
      assert.equal(revoked.statusCode, 303);
      assert.equal(revoked.headers.location, `${CLIENTS}/${clientId}`);
      assert.match(
        (await client.get(`${CLIENTS}/${clientId}`)).body,
        new RegExp(`Nothing was changed: OAuth client &quot;${clientId}&quot; has no grant with id`),
      );
    });

    test('delete after a confirmation page: the client is gone and its secret and tokens stop working', async () => {
      const { clientId, secret } = await registerConfidential('Doomed');
      const { access_token: accessToken } = (await tokenRequest(clientId, secret)).json();

      const confirmation = await client.get(`${CLIENTS}/${clientId}/delete`);
      assert.equal(confirmation.statusCode, 200);
      assert.match(confirmation.body, /Delete OAuth client “Doomed”\?/);
      assert.match(confirmation.body, /Deleting is permanent/);
      assert.match(
        confirmation.body,
        new RegExp(`<form method="post" action="${CLIENTS}/${clientId}/delete"`),
      );
      assert.ok(
        await oauthClientRepository.findById(ctx.db, clientId),
        'showing the confirmation deletes nothing',
      );

      const res = await client.submit(confirmation.body, `${CLIENTS}/${clientId}/delete`);
      assert.equal(res.statusCode, 303);
      assert.equal(res.headers.location, INTEGRATIONS);
      const page = (await client.get(INTEGRATIONS)).body;
      assert.match(page, /OAuth client “Doomed” deleted: its tokens stop working at their next use\./);
      assert.doesNotMatch(page, new RegExp(`data-client-id="${clientId}"`));
      assert.equal(await oauthClientRepository.findById(ctx.db, clientId), undefined);

      assert.equal((await tokenRequest(clientId, secret)).statusCode, 401);
      const users = await ctx.app.inject({
        method: 'GET',
        url: '/api/v1/users',
        headers: bearer(accessToken),
      });
      assert.equal(users.statusCode, 401);

      const again = await client.submit(page, `${CLIENTS}/${clientId}/delete`);
      assert.equal(again.statusCode, 303);
      assert.match((await client.get(INTEGRATIONS)).body, /Nothing was changed: no OAuth client with id/);
    });

    test("another account's client is neither listed nor deletable; nothing changes", async () => {
      const other = await seedAccount(ctx.db);
      const { client: foreign, clientSecret } = await oauthClientService.create(ctx.db, {
        accountId: other,
        name: 'Foreign app',
        redirectUris: ['https://foreign.example/cb'],
        isPublic: false,
      });
      const page = await client.get(INTEGRATIONS);
      assert.doesNotMatch(page.body, /Foreign app/);
      assert.doesNotMatch(page.body, new RegExp(foreign.client_id));

      const confirmation = await client.get(`${CLIENTS}/${foreign.client_id}/delete`);
      assert.equal(confirmation.statusCode, 404);
      assert.match(confirmation.body, /OAuth client not found/);
      assert.equal((await client.get(`${CLIENTS}/oc_missing/delete`)).statusCode, 404);

      const res = await client.submit(page.body, `${CLIENTS}/${foreign.client_id}/delete`);
      assert.equal(res.statusCode, 303);
      assert.equal(res.headers.location, INTEGRATIONS);
      assert.match(
        (await client.get(INTEGRATIONS)).body,
        new RegExp(`Nothing was changed: no OAuth client with id &quot;${foreign.client_id}&quot;\\.`),
      );
      assert.ok(await oauthClientRepository.findById(ctx.db, foreign.client_id));
      assert.equal((await tokenRequest(foreign.client_id, clientSecret as string)).statusCode, 200);
    });

    /** A user's grant of the client with one access token under it, stored as the provider stores them. */
    async function seedGrant(clientId: string, name: string): Promise<{ grantId: string; userId: string }> {
      const user = await seedUser(ctx.db, accountId, { role: 'employee', name });
      const grantId = `grant-${user.id}`;
      const iat = Math.floor(Date.now() / 1000);
      const adapter = kyselyAdapter(ctx.db);
      await adapter('Grant').upsert(
        grantId,
        { kind: 'Grant', jti: grantId, accountId: user.id, clientId, openid: { scope: 'openid email' }, iat },
        3600,
      );
      await adapter('AccessToken').upsert(
        `at-${user.id}`,
        { kind: 'AccessToken', jti: `at-${user.id}`, accountId: user.id, clientId, grantId, iat },
        3600,
      );
      return { grantId, userId: user.id };
    }

    const grantRows = (grantId: string) =>
      ctx.db
        .selectFrom('oauth_payloads')
        .select('model')
        .where((eb) => eb.or([eb('grant_id', '=', grantId), eb('id', '=', grantId)]))
        .orderBy('model')
        .execute();

    test("a client's page: rotate the secret (shown once, old one kept for the overlap), list and revoke grants; audited", async () => {
      const { clientId, secret } = await registerConfidential('Lifecycle');
      const { grantId } = await seedGrant(clientId, 'Grace Granter');
      const list = (await client.get(INTEGRATIONS)).body;
      assert.match(list, new RegExp(`href="${CLIENTS}/${clientId}" aria-label="Manage Lifecycle"`));

      const page = await client.get(`${CLIENTS}/${clientId}`);
      assert.equal(page.statusCode, 200);
      const grantRow = page.body.slice(page.body.indexOf(`data-grant-id="${grantId}"`));
      assert.match(grantRow, /Grace Granter/);
      assert.match(grantRow, /<code>openid<\/code> <code>email<\/code>/);
      assert.match(grantRow, /data-label="Last token use"><time datetime=/, 'the token issued is a use');

      const rotated = await client.submit(page.body, `${CLIENTS}/${clientId}/rotate-secret`, {
        overlap: '1h',
      });
      assert.equal(rotated.statusCode, 303);
      assert.equal(rotated.headers.location, `${CLIENTS}/${clientId}`);
      const shown = (await client.get(`${CLIENTS}/${clientId}`)).body;
      const newSecret = fieldValue(shown, 'new-client-secret');
      assert.match(newSecret ?? '', /^ocs_[0-9a-f]{64}$/);
      assert.match(shown, /The old secret works until \d{4}-/);
      assert.equal(
        (await client.get(`${CLIENTS}/${clientId}`)).body.match(CLIENT_SECRET),
        null,
        'shown once',
      );
      assert.equal((await tokenRequest(clientId, newSecret as string)).statusCode, 200);
      assert.equal(
        (await tokenRequest(clientId, secret)).statusCode,
        200,
        'the old secret during the overlap',
      );

      const revoke = await client.submit(shown, `${CLIENTS}/${clientId}/grants/${grantId}/revoke`);
      assert.equal(revoke.statusCode, 303);
      assert.equal(revoke.headers.location, `${CLIENTS}/${clientId}`);
      assert.deepEqual(await grantRows(grantId), [], 'the grant and its tokens are gone');
      const after = (await client.get(`${CLIENTS}/${clientId}`)).body;
      assert.match(after, /Grant revoked/);
      assert.match(after, /No one has granted this app access/);

      const events = await ctx.db
        .selectFrom('audit_events')
        .select(['action', 'subject_type'])
        .where('subject_id', '=', clientId)
        .orderBy('id')
        .execute();
      assert.deepEqual(events, [
        { action: 'secret_rotated', subject_type: 'oauth_client' },
        { action: 'grant_revoked', subject_type: 'oauth_client' },
      ]);
    });

    test("another account's client or grant is not found, and a bad overlap changes nothing", async () => {
      const otherAccount = await seedAccount(ctx.db);
      const { client: foreign } = await oauthClientService.create(ctx.db, {
        accountId: otherAccount,
        name: 'Foreign',
        redirectUris: ['https://foreign.example/cb'],
        isPublic: false,
      });
      const { grantId } = await seedGrant(foreign.client_id, 'Foreign user');
      assert.equal((await client.get(`${CLIENTS}/${foreign.client_id}`)).statusCode, 404);
      const page = (await client.get(INTEGRATIONS)).body;
      await client.submit(page, `${CLIENTS}/${foreign.client_id}/rotate-secret`, { overlap: 'now' });
      await client.submit(page, `${CLIENTS}/${foreign.client_id}/grants/${grantId}/revoke`);
      assert.deepEqual(await grantRows(grantId), [{ model: 'AccessToken' }, { model: 'Grant' }]);
      assert.equal(
        (await oauthClientRepository.findById(ctx.db, foreign.client_id))?.previous_secret_hash,
        null,
      );

      const { clientId } = await registerConfidential('Bad overlap');
      const before = await oauthClientRepository.findById(ctx.db, clientId);
      const res = await client.submit(page, `${CLIENTS}/${clientId}/rotate-secret`, { overlap: '2h' });
      assert.equal(res.statusCode, 303);
      assert.match(
        (await client.get(`${CLIENTS}/${clientId}`)).body,
        /Nothing was changed: overlap must be one of/,
      );
      assert.deepEqual(await oauthClientRepository.findById(ctx.db, clientId), before);
    });

    describeAdminRouteAccess(
      'the OAuth client pages',
      () => ({ ctx, accountId }),
      async (): Promise<AdminRouteTable> => {
        const { clientId, secret } = await registerConfidential('Super Admins only');
        const { grantId } = await seedGrant(clientId, 'Role user');
        return {
          hidden: ['Super Admins only', 'Role user'],
          unchanged: async () => ({
            clients: await ctx.db
              .selectFrom('oauth_clients')
              .selectAll()
              .where('account_id', '=', accountId)
              .orderBy('client_id')
              .execute(),
            grant: await grantRows(grantId),
          }),
          stillWorks: async () => {
            assert.equal((await tokenRequest(clientId, secret)).statusCode, 200);
            assert.equal(
              (await oauthClientRepository.findById(ctx.db, clientId))?.previous_secret_hash,
              null,
            );
            assert.equal((await grantRows(grantId)).length, 2);
          },
          routes: [
            {
              method: 'POST',
              url: CLIENTS,
              form: { name: 'Sneaky', redirect_uris: 'https://sneaky.example/cb', type: 'confidential' },
            },
            { method: 'GET', url: `${CLIENTS}/${clientId}` },
            { method: 'GET', url: `${CLIENTS}/${clientId}/delete` },
            { method: 'POST', url: `${CLIENTS}/${clientId}/rotate-secret`, form: { overlap: 'now' } },
            { method: 'POST', url: `${CLIENTS}/${clientId}/grants/${grantId}/revoke` },
            { method: 'POST', url: `${CLIENTS}/${clientId}/delete` },
          ],
        };
      },
    );
  });
}
