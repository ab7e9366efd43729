import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { apiKeyRepository } from '../../../src/db/repositories/api-keys.ts';
import { setImmediate as tick } from 'node:timers/promises';
import { generateApiKey } from '../../../src/auth/api-keys.ts';
import { apiKeyService } from '../../../src/services/api-key-service.ts';
import { bearer, createTestContext, STORES, seedAccount, seedKey, type TestContext } from '../../helpers.ts';
import { AdminClient, type SeededUser, seedUser } from './admin-helpers.ts';
import { describeAdminRouteAccess } from './route-access.ts';

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

    test('a name no store can keep (NUL, a lone surrogate) is refused naming the field; nothing changes', async () => {
      const { id } = await createThroughPanel({ name: 'Kept', scope: 'read' });
      const before = (await apiKeyService.list(ctx.db, accountId)).length;
      const page = (await client.get(INTEGRATIONS)).body;
      const created = await client.submit(page, KEYS, { name: 'Power\u0000BI', scope: 'read' });
      assert.equal(created.statusCode, 303);
      assert.equal(created.headers.location, INTEGRATIONS);
      assert.match(
        (await client.get(INTEGRATIONS)).body,
        /The key was not created: name must not contain the NUL character \(\\u0000\)\./,
      );
      const lone = await client.submitJson(page, KEYS, { name: 'Power\ud800BI', scope: 'read' });
      assert.equal(lone.statusCode, 303);
      assert.match(
        (await client.get(INTEGRATIONS)).body,
        /The key was not created: name must be valid Unicode: it holds a lone surrogate \(\\ud800–\\udfff\)\./,
      );
      assert.equal((await apiKeyService.list(ctx.db, accountId)).length, before);

      const renamed = await keyAction(id, 'rename', { name: 'Kept\u0000again' });
      assert.equal(renamed.statusCode, 303);
      assert.equal(renamed.headers.location, `${KEYS}/${id}`);
      assert.match(
        (await client.get(`${KEYS}/${id}`)).body,
        /Nothing was changed: name must not contain the NUL character \(\\u0000\)\./,
      );
      assert.equal((await apiKeyRepository.findById(ctx.db, id))?.name, 'Kept');
    });

    test('a key id or a search no store can hold finds nothing, as any unknown one does', async () => {
      const missing = await client.get(`${KEYS}/%00`);
      assert.equal(missing.statusCode, 404);
      assert.match(missing.body, /This account has no API key with that id\./);
      assert.equal((await client.get(`${KEYS}/%00/revoke`)).statusCode, 404);
      const page = (await client.get(INTEGRATIONS)).body;
      for (const action of ['rename', 'disable', 'roll']) {
        const res = await client.submit(page, `${KEYS}/%00/${action}`, { name: 'x', overlap: '1h' });
        assert.equal(res.statusCode, 303);
        assert.equal(res.headers.location, INTEGRATIONS);
        assert.match((await client.get(INTEGRATIONS)).body, /Nothing was changed: no API key with id/);
      }
      const search = await client.get(`${INTEGRATIONS}?q=Kept%00`);
      assert.equal(search.statusCode, 200);
      assert.doesNotMatch(search.body, /<tr data-key-id=/);
      assert.match(search.body, /No API keys match\./);
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

    test("the key pages link to the audit trail: every key event from the list, one key's history from its page", async () => {
      const { id } = await createThroughPanel({ name: 'Followed', scope: 'read' });
      const { id: otherId } = await createThroughPanel({ name: 'Not followed', scope: 'read' });
      await keyAction(id, 'disable');
      const list = (await client.get(INTEGRATIONS)).body;
      assert.match(
        list,
        /<a href="\/admin\/settings\/integrations\/audit\?subject_type=api_key">Every API key event<\/a>/,
      );

      const page = (await client.get(`${KEYS}/${id}`)).body;
      const href = /<a id="key-history" href="([^"]+)"/.exec(page)?.[1]?.replaceAll('&amp;', '&');
      assert.equal(href, `/admin/settings/integrations/audit?subject_type=api_key&subject_id=${id}`);
      const history = await client.get(href);
      assert.equal(history.statusCode, 200);
      const rows = [...history.body.matchAll(/<tr data-event-id="\d+">([\s\S]*?)<\/tr>/g)].map(
        (m) => m[1] ?? '',
      );
      assert.deepEqual(
        rows.map((row) => /data-label="Action">([^<]*)</.exec(row)?.[1]),
        ['disabled', 'created'],
        'its events, newest first',
      );
      assert.ok(rows.every((row) => row.includes(`<code>${id}</code>`)));
      assert.ok(!history.body.includes(otherId), 'no other key');
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

    test('roll: the successor works at once and is shown once, the old key until its chosen time; linked, audited', async () => {
      const expiresAt = `${isoDate(60)}T00:00:00.000Z`;
      const old = await seedKey(ctx.db, accountId, { name: 'PowerBI', scope: 'read-write', expiresAt });
      assert.equal(await publicStatus(old.rawKey), 200);

      const res = await keyAction(old.id, 'roll', { overlap: '1h' });
      assert.equal(res.statusCode, 303);
      const successorId = (await apiKeyRepository.findById(ctx.db, old.id))?.rolled_to;
      assert.ok(successorId);
      assert.equal(res.headers.location, `${KEYS}/${successorId}`);
      const page = (await client.get(`${KEYS}/${successorId}`)).body;
      const shown = page.match(RAW_KEY);
      assert.ok(shown !== null && shown.length === 1, 'the new raw key is on its page once');
      const rawKey = shown[0];
      assert.match(page, /It will not be shown again/);
      assert.equal((await client.get(`${KEYS}/${successorId}`)).body.match(RAW_KEY), null, 'and never again');

      const successor = await apiKeyRepository.findById(ctx.db, successorId);
      assert.equal(successor?.name, `PowerBI (rolled ${new Date().toISOString().slice(0, 10)})`);
      assert.equal(successor?.scope, 'read-write');
      assert.equal(successor?.expires_at, expiresAt, 'the same expiry');
      assert.equal(successor?.rolled_from, old.id);
      const oldRow = await apiKeyRepository.findById(ctx.db, old.id);
      const oldExpiry = Date.parse(oldRow?.expires_at ?? '');
      assert.ok(Math.abs(oldExpiry - (Date.now() + 3600_000)) < 60_000, 'the old key expires in an hour');
      assert.equal(await publicStatus(rawKey), 200);
      assert.equal(await publicStatus(old.rawKey), 200, 'both work during the overlap');

      // Each page links to the other.
      const successorPage = (await client.get(`${KEYS}/${successorId}`)).body;
      assert.match(
        successorPage,
        new RegExp(`<dt>Replaces</dt><dd id="key-rolled-from"><a href="${KEYS}/${old.id}">PowerBI</a>`),
      );
      const oldPage = (await client.get(`${KEYS}/${old.id}`)).body;
      assert.match(
        oldPage,
        new RegExp(
          `<dt>Replaced by</dt><dd id="key-rolled-to"><a href="${KEYS}/${successorId}">PowerBI \\(rolled`,
        ),
      );
      assert.match(oldPage, /Only an active key that was not rolled yet can be rolled/);

      assert.equal((await lastEvent(old.id))?.action, 'rolled');
      assert.equal((await lastEvent(old.id))?.actor, admin.id);
      assert.equal((await lastEvent(successorId))?.action, 'created_by_roll');

      // Rolling it again is refused and changes nothing.
      await keyAction(old.id, 'roll', { overlap: '7d' });
      assert.match(
        (await client.get(`${KEYS}/${old.id}`)).body,
        /Nothing was changed: the key was already rolled/,
      );
      assert.equal((await apiKeyRepository.findById(ctx.db, old.id))?.expires_at, oldRow?.expires_at);
    });

    test('roll with overlap "now": the old key stops at once; a bad overlap changes nothing', async () => {
      const old = await seedKey(ctx.db, accountId, { name: 'Leaked' });
      assert.equal(await publicStatus(old.rawKey), 200);
      // The use is written by the recorder's own timer; write it now, so the row compared below
      // changes only if the refused roll changes it.
      await ctx.runtime.lastUse.flush();
      const before = await apiKeyRepository.findById(ctx.db, old.id);
      assert.notEqual(before?.last_used_at, null);
      await keyAction(old.id, 'roll', { overlap: '2h' });
      assert.match(
        (await client.get(`${KEYS}/${old.id}`)).body,
        /Nothing was changed: overlap must be one of now, 1h, 24h, 7d/,
      );
      assert.deepEqual(await apiKeyRepository.findById(ctx.db, old.id), before);

      await keyAction(old.id, 'roll', { overlap: 'now' });
      assert.equal(await publicStatus(old.rawKey), 401);
      const successorId = (await apiKeyRepository.findById(ctx.db, old.id))?.rolled_to;
      assert.ok(successorId);
      assert.equal((await apiKeyService.findOwn(ctx.db, old.id, accountId))?.state, 'expired');
    });

    test('the key page shows the usage: totals for 24 h, 7 d and 30 d, a chart and its table', async () => {
      const key = await seedKey(ctx.db, accountId, { name: 'Counted' });
      for (let i = 0; i < 3; i += 1) assert.equal(await publicStatus(key.rawKey), 200);
      const missing = await ctx.app.inject({
        method: 'GET',
        url: '/api/v1/public/incidents/none',
        headers: bearer(key.rawKey),
      });
      assert.equal(missing.statusCode, 404);
      await tick();
      await ctx.runtime.keyUsage.flush();
      const page = (await client.get(`${KEYS}/${key.id}`)).body;
      assert.match(page, /<th scope="row">Last 24 hours<\/th><td>3<\/td><td>1<\/td><td>0<\/td>/);
      assert.match(page, /<th scope="row">Last 30 days<\/th><td>3<\/td><td>1<\/td><td>0<\/td>/);
      assert.match(
        page,
        /<svg class="usage-chart" role="img"[^>]*aria-labelledby="usage-chart-title usage-chart-desc"/,
      );
      assert.equal(
        (page.match(/<rect x="\d+" y="[\d.]+" width="1"/g) ?? []).length,
        2,
        'one bar of two classes',
      );
      assert.match(page, /<summary>Requests per hour as a table<\/summary>/);
      assert.equal(
        (page.match(/<tr><th scope="row"><time datetime=/g) ?? []).length,
        1,
        'one hour with traffic',
      );
      assert.doesNotMatch(page, /style="|<script>/, 'nothing inline (CSP)');
    });

    test('find keys: search by name or prefix, filter by state, sort by last use, through GET parameters', async () => {
      const finder = await seedAccount(ctx.db);
      const user = await seedUser(ctx.db, finder);
      const own = new AdminClient(ctx.app, '203.0.113.9');
      assert.equal((await own.signIn(user.email)).statusCode, 303);
      const powerBi = await seedKey(ctx.db, finder, { name: 'PowerBI finance' });
      const tableau = await seedKey(ctx.db, finder, { name: 'Tableau' });
      const soon = await seedKey(ctx.db, finder, { name: 'Short 50%_off', expiresAt: isoDate(3) });
      const disabled = await seedKey(ctx.db, finder, { name: 'Paused' });
      await apiKeyService.disable(ctx.db, disabled.id, 'test');
      const revoked = await seedKey(ctx.db, finder, { name: 'Gone' });
      await apiKeyService.revoke(ctx.db, revoked.id, 'test');
      const expired = await seedKey(ctx.db, finder, { name: 'Old' });
      await ctx.db
        .updateTable('api_keys')
        .set({ expires_at: '2026-01-02T00:00:00.000Z' })
        .where('id', '=', expired.id)
        .execute();
      await ctx.db
        .updateTable('api_keys')
        .set({ last_used_at: '2026-11-01T00:00:00.000Z' })
        .where('id', '=', tableau.id)
        .execute();
      await ctx.db
        .updateTable('api_keys')
        .set({ last_used_at: '2026-11-02T00:00:00.000Z' })
        .where('id', '=', soon.id)
        .execute();

      const listed = async (query: string) => {
        const res = await own.get(`${INTEGRATIONS}${query}`);
        assert.equal(res.statusCode, 200, query);
        return [...res.body.matchAll(/<tr data-key-id="([^"]+)">/g)].map((m) => m[1]);
      };
      assert.deepEqual(await listed('?q=powerbi'), [powerBi.id], 'any case, part of the name');
      assert.deepEqual(await listed('?q=50%25_'), [soon.id], '% and _ are literal');
      assert.deepEqual(await listed(`?q=${powerBi.rawKey.slice(0, 10)}`), [powerBi.id], 'the prefix');
      assert.deepEqual(
        await listed(`?q=${powerBi.rawKey.slice(4, 10)}`),
        [powerBi.id],
        'the prefix without svc_',
      );
      assert.deepEqual(await listed('?state=disabled'), [disabled.id]);
      assert.deepEqual(await listed('?state=revoked'), [revoked.id]);
      assert.deepEqual(await listed('?state=expired'), [expired.id]);
      assert.deepEqual(await listed('?state=expiring'), [soon.id]);
      assert.deepEqual(new Set(await listed('?state=active')), new Set([powerBi.id, tableau.id, soon.id]));
      assert.deepEqual((await listed('?sort=last_used')).slice(0, 2), [soon.id, tableau.id]);
      assert.deepEqual(await listed('?q=nothing-like-it'), []);
      assert.match((await own.get(`${INTEGRATIONS}?q=nothing-like-it`)).body, /No API keys match\./);
      // Unknown values are the defaults, never an error.
      assert.equal((await listed('?q=Tab&q=Power&state=active&state=revoked')).length, 6);
      assert.equal((await listed('?state=bogus&sort=bogus&page=-3')).length, 6);
      const form = (await own.get(`${INTEGRATIONS}?q=Tab&state=active&sort=last_used`)).body;
      assert.match(form, /<input id="find-q" name="q" type="search" maxlength="100" value="Tab">/);
      assert.match(form, /<option value="active" selected>/);
      assert.match(form, /<option value="last_used" selected>/);
    });

    test('Settings > Integrations lists the OAuth clients section', async () => {
      const page = (await client.get(INTEGRATIONS)).body;
      assert.match(page, /<h2 id="oauth-clients-heading">OAuth clients<\/h2>/);
      assert.match(page, /<li>Settings<\/li><li>Integrations<\/li>/);
    });

    describeAdminRouteAccess(
      'the API key pages',
      () => ({ ctx, accountId }),
      async () => {
        const key = await seedKey(ctx.db, accountId, { name: 'Guarded from admins' });
        const paused = await seedKey(ctx.db, accountId, { name: 'Guarded from admins, paused' });
        await apiKeyService.disable(ctx.db, paused.id, 'test');
        // Each form would act if let through: `enable` goes to the disabled key.
        const form = { name: 'Taken over', scope: 'admin', overlap: 'now' };
        return {
          hidden: ['Guarded from admins', key.rawKey.slice(0, 12), paused.rawKey.slice(0, 12)],
          unchanged: async () => ({
            guarded: await ctx.db
              .selectFrom('api_keys')
              .selectAll()
              .where('id', 'in', [key.id, paused.id])
              .orderBy('id')
              .execute(),
            // Every key of the account (a form adds, renames, rescopes, disables or rolls one), less
            // the last use, which the public API requests of earlier tests may still be recording.
            all: await ctx.db
              .selectFrom('api_keys')
              .select(['id', 'name', 'scope', 'state', 'expires_at', 'rolled_to'])
              .where('account_id', '=', accountId)
              .orderBy('id')
              .execute(),
          }),
          stillWorks: async () => assert.equal(await publicStatus(key.rawKey), 200),
          routes: [
            { method: 'GET', url: '/admin/settings' },
            { method: 'GET', url: INTEGRATIONS },
            { method: 'GET', url: `${INTEGRATIONS}?q=Guarded&state=active&sort=last_used&page=2` },
            { method: 'GET', url: `${KEYS}/${key.id}` },
            { method: 'GET', url: `${KEYS}/${key.id}/revoke` },
            { method: 'POST', url: KEYS, form: { ...form, name: 'Sneaky' } },
            { method: 'POST', url: `${KEYS}/${key.id}/rename`, form },
            { method: 'POST', url: `${KEYS}/${key.id}/scope`, form },
            { method: 'POST', url: `${KEYS}/${key.id}/disable`, form },
            { method: 'POST', url: `${KEYS}/${paused.id}/enable`, form },
            { method: 'POST', url: `${KEYS}/${key.id}/revoke`, form },
            { method: 'POST', url: `${KEYS}/${key.id}/roll`, form },
          ],
        };
      },
    );
  });

  describe(`admin keys list with 10,000 keys in an account (${store})`, () => {
    let ctx: TestContext;
    let client: AdminClient;
    const names: string[] = [];

    before(async () => {
      ctx = await createTestContext(store);
      const accountId = await seedAccount(ctx.db);
      const user = await seedUser(ctx.db, accountId);
      // Inserted directly, 500 a statement: 10,000 keys through the service would take minutes.
      const rows = Array.from({ length: 10_000 }, (_, i) => {
        const { keyHash, prefix } = generateApiKey();
        const name = `Integration ${String(i).padStart(5, '0')}`;
        names.push(name);
        const stamp = new Date(Date.UTC(2026, 0, 1) + i * 60_000).toISOString();
        return {
          id: crypto.randomUUID(),
          account_id: accountId,
          name,
          prefix,
          key_hash: keyHash,
          scope: 'read',
          state: i % 10 === 0 ? 'disabled' : 'active',
          expires_at: null,
          last_used_at: i % 3 === 0 ? new Date(Date.UTC(2026, 5, 1) + i * 1000).toISOString() : null,
          created_by: 'test',
          created_at: stamp,
          updated_at: stamp,
        };
      });
      for (let start = 0; start < rows.length; start += 500)
        await ctx.db
          .insertInto('api_keys')
          .values(rows.slice(start, start + 500))
          .execute();
      client = new AdminClient(ctx.app);
      assert.equal((await client.signIn(user.email)).statusCode, 303);
    });
    after(() => ctx.close());

    const namesOn = (body: string) =>
      [...body.matchAll(/<td data-label="Name"><a href="[^"]+">([^<]+)<\/a>/g)].map((m) => m[1]);

    test('pages of 50, newest first, with links to the next and previous pages', async () => {
      const first = await client.get(INTEGRATIONS);
      assert.equal(first.statusCode, 200);
      assert.deepEqual(namesOn(first.body), names.slice(-50).reverse());
      assert.match(first.body, /Keys 1–50 of 10,000 · page 1 of 200/);
      assert.match(
        first.body,
        /<a href="\/admin\/settings\/integrations\?page=2#api-keys" rel="next">Next page<\/a>/,
      );
      assert.doesNotMatch(first.body, /rel="prev"/);

      const last = await client.get(`${INTEGRATIONS}?page=200`);
      assert.deepEqual(namesOn(last.body), names.slice(0, 50).reverse());
      assert.match(last.body, /rel="prev">Previous page/);
      assert.doesNotMatch(last.body, /rel="next"/);
      assert.deepEqual(namesOn((await client.get(`${INTEGRATIONS}?page=201`)).body), []);
    });

    test('search, state and sort combine, and the page links keep them', async () => {
      const res = await client.get(`${INTEGRATIONS}?q=integration+09&state=disabled&sort=last_used`);
      // 09000–09999 disabled: every tenth, 100 keys; used ones (multiples of 30) first, latest first.
      const shown = namesOn(res.body);
      assert.equal(shown.length, 50);
      assert.match(res.body, /Keys 1–50 of 100 · page 1 of 2/);
      assert.equal(shown[0], 'Integration 09990');
      assert.equal(shown[1], 'Integration 09960');
      assert.match(
        res.body,
        /<a href="\/admin\/settings\/integrations\?q=integration\+09&amp;state=disabled&amp;sort=last_used&amp;page=2#api-keys" rel="next">/,
      );
      const second = namesOn(
        (await client.get(`${INTEGRATIONS}?q=integration+09&state=disabled&sort=last_used&page=2`)).body,
      );
      assert.equal(second.length, 50);
      assert.equal(new Set([...shown, ...second]).size, 100, 'no key on both pages');
    });
  });
}
