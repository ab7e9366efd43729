import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { apiKeyRepository } from '../../../src/db/repositories/api-keys.ts';
import { apiKeyService } from '../../../src/services/api-key-service.ts';
import { bearer, createTestContext, STORES, seedAccount, seedKey, type TestContext } from '../../helpers.ts';
import { AdminClient, type SeededUser, seedUser } from './admin-helpers.ts';

const INTEGRATIONS = '/admin/settings/integrations';
const KEYS = '/admin/settings/integrations/api-keys';
const RAW_KEY = /svc_[0-9a-f]{40}/g;

function isoDate(daysFromNow: number): string {
  return new Date(Date.now() + daysFromNow * 24 * 3600 * 1000).toISOString().slice(0, 10);
}

for (const store of STORES) {
  describe(`admin API key pages (${store})`, () => {
    let ctx: TestContext;
    let accountId: string;
    let admin: SeededUser;
    let client: AdminClient;

    before(async () => {
      ctx = await createTestContext(store);
      accountId = await seedAccount(ctx.db);
      admin = await seedUser(ctx.db, accountId, { name: 'Ada Admin' });
      client = new AdminClient(ctx.app);
      assert.equal((await client.signIn(admin.email)).statusCode, 303);
    });
    after(() => ctx.close());

    const publicStatus = async (rawKey: string) =>
      (await ctx.app.inject({ method: 'GET', url: '/api/v1/public/incidents', headers: bearer(rawKey) }))
        .statusCode;

    /** Creates a key through the panel; returns its raw value (read from the one page that shows it) and id. */
    async function createThroughPanel(
      form: Record<string, string>,
    ): Promise<{ id: string; rawKey: string; page: string }> {
      const before = await client.get(INTEGRATIONS);
      const res = await client.submit(before.body, KEYS, form);
      assert.equal(res.statusCode, 303);
      assert.equal(res.headers.location, INTEGRATIONS);
      const page = await client.get(INTEGRATIONS);
      const shown = page.body.match(RAW_KEY);
      assert.ok(shown !== null && shown.length === 1, 'the raw key is on the page once');
      const keys = await apiKeyService.list(ctx.db, accountId);
      const key = keys.find((k) => k.prefix === shown[0].slice(0, 12));
      assert.ok(key);
      return { id: key.id, rawKey: shown[0], page: page.body };
    }

    async function keyAction(keyId: string, action: string, form: Record<string, string> = {}) {
      const page = await client.get(`${KEYS}/${keyId}`);
      return client.submit(page.body, `${KEYS}/${keyId}/${action}`, form);
    }

    async function lastEvent(keyId: string) {
      const events = await apiKeyService.listEvents(ctx.db, accountId, 100);
      return events.find((event) => event.subject_id === keyId);
    }

    test('create: the raw key is shown once with a copy button and a warning, then never again', async () => {
      const { id, rawKey, page } = await createThroughPanel({ name: 'Power BI', scope: '', expires_at: '' });
      assert.match(page, /API key “Power BI” created/);
      assert.match(page, /It will not be shown again/);
      assert.match(
        page,
        /<button type="button" class="button" data-copy-target="new-key-value" hidden>Copy<\/button>/,
      );

      const again = await client.get(INTEGRATIONS);
      assert.equal(again.body.match(RAW_KEY), null, 'a reload does not show the key');
      assert.match(again.headers['cache-control'] as string, /no-store/);
      assert.equal((await client.get(`${KEYS}/${id}`)).body.match(RAW_KEY), null);

      const [key] = (await apiKeyService.list(ctx.db, accountId)).filter((k) => k.id === id);
      assert.equal(key?.scope, 'read', 'scope defaults to read');
      assert.equal(key?.created_by, admin.id);
      assert.equal(await publicStatus(rawKey), 200);
      const event = await lastEvent(id);
      assert.equal(event?.action, 'created');
      assert.equal(event?.actor, admin.id);
    });

    test('the list shows name, prefix, scope, state, last use, expiry, creator and creation time', async () => {
      const { id } = await createThroughPanel({
        name: 'Listed',
        scope: 'read-write',
        expires_at: isoDate(30),
      });
      const page = (await client.get(INTEGRATIONS)).body;
      const row = page.slice(
        page.indexOf(`data-key-id="${id}"`),
        page.indexOf('</tr>', page.indexOf(`data-key-id="${id}"`)),
      );
      assert.match(row, /Listed/);
      assert.match(row, /<code>svc_[0-9a-f]{8}…<\/code>/);
      assert.match(row, /read-write/);
      assert.match(row, /Active/);
      assert.match(row, /data-label="Last used">Never/);
      assert.match(row, new RegExp(`data-label="Expires"><time datetime="${isoDate(31)}T00:00:00.000Z"`));
      assert.match(row, /data-label="Created by">Ada Admin/);
      assert.doesNotMatch(row, /Expires soon/);
    });

    test('a key expiring within 7 days is flagged', async () => {
      const { id } = await createThroughPanel({ name: 'Short lived', scope: 'read', expires_at: isoDate(2) });
      const page = (await client.get(INTEGRATIONS)).body;
      const start = page.indexOf(`data-key-id="${id}"`);
      assert.match(page.slice(start, page.indexOf('</tr>', start)), /Expires soon/);
    });

    test('bad input is shown as a message and creates nothing', async () => {
      const before = (await apiKeyService.list(ctx.db, accountId)).length;
      const form = await client.get(INTEGRATIONS);
      await client.submit(form.body, KEYS, { name: 'Past', scope: 'read', expires_at: '2020-01-01' });
      const page = await client.get(INTEGRATIONS);
      assert.match(page.body, /The key was not created: expiry must be in the future/);
      await client.submit(page.body, KEYS, { name: '   ', scope: 'read' });
      assert.match((await client.get(INTEGRATIONS)).body, /name must not be empty/);
      assert.equal((await apiKeyService.list(ctx.db, accountId)).length, before);
    });

    test('rename, change scope, disable, enable and revoke: each takes effect at once and is audited', async () => {
      const { id, rawKey } = await createThroughPanel({ name: 'Lifecycle', scope: 'read' });

      let res = await keyAction(id, 'rename', { name: 'Lifecycle v2' });
      assert.equal(res.statusCode, 303);
      assert.equal(res.headers.location, `${KEYS}/${id}`);
      let page = (await client.get(`${KEYS}/${id}`)).body;
      assert.match(page, /Key renamed to “Lifecycle v2”\./);
      assert.match(page, /<h1>API key “Lifecycle v2”<\/h1>/);
      assert.equal((await lastEvent(id))?.action, 'renamed');

      await keyAction(id, 'scope', { scope: 'admin' });
      assert.equal((await apiKeyRepository.findById(ctx.db, id))?.scope, 'admin');
      assert.equal((await lastEvent(id))?.detail, 'from read to admin');

      await keyAction(id, 'disable');
      assert.equal(await publicStatus(rawKey), 401);
      const refused = await ctx.app.inject({
        method: 'GET',
        url: '/api/v1/public/users',
        headers: bearer(rawKey),
      });
      assert.equal(refused.json().error, 'API_KEY_INVALID');
      page = (await client.get(`${KEYS}/${id}`)).body;
      assert.match(page, /Key “Lifecycle v2” disabled/);
      assert.match(page, /Enable key<\/button>/);

      await keyAction(id, 'enable');
      assert.equal(await publicStatus(rawKey), 200);

      const confirmation = await client.get(`${KEYS}/${id}/revoke`);
      assert.equal(confirmation.statusCode, 200);
      assert.match(confirmation.body, /Revoking is permanent/);
      res = await client.submit(confirmation.body, `${KEYS}/${id}/revoke`);
      assert.equal(res.statusCode, 303);
      assert.equal(await publicStatus(rawKey), 401);

      res = await keyAction(id, 'enable');
      page = (await client.get(`${KEYS}/${id}`)).body;
      assert.match(page, /Nothing was changed: a revoked key cannot be enabled/);
      assert.equal((await apiKeyRepository.findById(ctx.db, id))?.state, 'revoked');

      const actions = (await apiKeyService.listEvents(ctx.db, accountId, 100))
        .filter((event) => event.subject_id === id)
        .map((event) => [event.action, event.actor]);
      assert.deepEqual(actions, [
        ['revoked', admin.id],
        ['enabled', admin.id],
        ['disabled', admin.id],
        ['scope_changed', admin.id],
        ['renamed', admin.id],
        ['created', admin.id],
      ]);
    });

    test('the audit trail on the page names who did what to which key', async () => {
      await apiKeyService.create(ctx.db, { accountId, name: 'From the shell', actor: 'cli' });
      const { id } = await createThroughPanel({ name: 'Audited', scope: 'read' });
      await keyAction(id, 'disable');
      const page = (await client.get(INTEGRATIONS)).body;
      const trail = page.slice(page.indexOf('id="audit-trail-table"'));
      assert.match(
        trail,
        /data-label="Who">Ada Admin<\/td>\s*<td data-label="Action">Disabled<\/td>\s*<td data-label="Key">Audited<\/td>/,
      );
      assert.match(
        trail,
        /data-label="Who">command line<\/td>\s*<td data-label="Action">Created<\/td>\s*<td data-label="Key">From the shell<\/td>/,
      );
    });

    test("another account's key: refused as unknown, nothing changes", async () => {
      const other = await seedAccount(ctx.db);
      const foreign = await seedKey(ctx.db, other);
      assert.equal((await client.get(`${KEYS}/${foreign.id}`)).statusCode, 404);
      assert.equal((await client.get(`${KEYS}/${foreign.id}/revoke`)).statusCode, 404);
      const page = await client.get(INTEGRATIONS);
      for (const action of ['disable', 'revoke']) {
        const res = await client.submit(page.body, `${KEYS}/${foreign.id}/${action}`);
        assert.equal(res.statusCode, 303);
        assert.equal(res.headers.location, INTEGRATIONS);
        assert.match((await client.get(INTEGRATIONS)).body, /Nothing was changed: no API key with id/);
      }
      assert.equal((await apiKeyRepository.findById(ctx.db, foreign.id))?.state, 'active');
      assert.equal(await publicStatus(foreign.rawKey), 200);
      assert.equal((await apiKeyService.listEvents(ctx.db, other, 10)).length, 1, 'only its creation');
    });

    test('a form post without the session CSRF token is refused with 403 and changes nothing', async () => {
      const { id, rawKey } = await createThroughPanel({ name: 'Guarded', scope: 'read' });
      const attempts = [
        await client.post(`${KEYS}/${id}/revoke`, {}),
        await client.post(`${KEYS}/${id}/revoke`, { _csrf: 'forged-token-forged-token-forged-token-0000' }),
        await ctx.app.inject({
          method: 'POST',
          url: `${KEYS}/${id}/revoke`,
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: `_csrf=${encodeURIComponent((await client.get(`${KEYS}/${id}`)).body.match(/name="_csrf" value="([^"]+)"/)?.[1] ?? '')}`,
        }),
        await client.post(KEYS, { name: 'Sneaky' }),
      ];
      for (const res of attempts) {
        assert.equal(res.statusCode, 403);
        assert.match(res.body, /Invalid or missing CSRF token/);
      }
      assert.equal((await apiKeyRepository.findById(ctx.db, id))?.state, 'active');
      assert.equal(await publicStatus(rawKey), 200);
      assert.ok(!(await apiKeyService.list(ctx.db, accountId)).some((key) => key.name === 'Sneaky'));
    });

    test('Settings > Integrations lists the OAuth clients section', async () => {
      const page = (await client.get(INTEGRATIONS)).body;
      assert.match(page, /<h2 id="oauth-clients-heading">OAuth clients<\/h2>/);
      assert.match(page, /<li>Settings<\/li><li>Integrations<\/li>/);
    });
  });
}
