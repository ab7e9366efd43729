import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { Webhook } from 'standardwebhooks';
import { webhookRepository } from '../../../src/db/repositories/webhooks.ts';
import { createTestContext, STORES, seedAccount, seedIncidents, type TestContext } from '../../helpers.ts';
import { type Received, Receiver } from '../../webhooks/receiver.ts';
import { AdminClient, type SeededUser, seedUser } from './admin-helpers.ts';
import { type AdminRoute, describeAdminRouteAccess } from './route-access.ts';

const WEBHOOKS = '/admin/settings/integrations/webhooks';
const SECRET = /whsec_[A-Za-z0-9+/]+={0,2}/g;
/** Every form the webhook pages post to, below an endpoint's path ('' is the create form's). */
const ENDPOINT_POSTS = [
  'update',
  'disable',
  'enable',
  'resend',
  'rotate-secret',
  'test',
  'redeliver',
  'skip',
  'delete',
];

/** The value of the read-only field with this id, as the one-time display shows it. */
function fieldValue(page: string, id: string): string | undefined {
  return new RegExp(`<input id="${id}" class="key-value" type="text" readonly value="([^"]*)"`).exec(
    page,
  )?.[1];
}

/** The table row of an endpoint on the list page. */
function rowOf(page: string, endpointId: string): string {
  const start = page.indexOf(`data-endpoint-id="${endpointId}"`);
  assert.ok(start > 0, 'the endpoint is listed');
  return page.slice(start, page.indexOf('</tr>', start));
}

/** What the flash or message of a page says, tags dropped. */
function text(page: string): string {
  return page.replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ');
}

function verify(secret: string, received: Received): unknown {
  return new Webhook(secret).verify(received.body, {
    'webhook-id': String(received.headers['webhook-id']),
    'webhook-timestamp': String(received.headers['webhook-timestamp']),
    'webhook-signature': String(received.headers['webhook-signature']),
  });
}

for (const store of STORES) {
  describe(`admin webhook pages (${store})`, () => {
    let ctx: TestContext;
    let accountId: string;
    let admin: SeededUser;
    let client: AdminClient;
    let receiver: Receiver;

    before(async () => {
      // Not started: nothing is delivered here but the test events the pages send.
      // The suite's account gathers an endpoint or two per test: past the default cap of 20. The cap
      // has a test of its own, on a context of its own.
      ctx = await createTestContext(store, {
        WEBHOOKS_ALLOW_PRIVATE: 'true',
        WEBHOOK_TIMEOUT_MS: '2000',
        WEBHOOK_MAX_ENDPOINTS: '1000',
      });
      accountId = await seedAccount(ctx.db, { name: 'Northwind' });
      admin = await seedUser(ctx.db, accountId, { name: 'Wendy Webhooks' });
      client = new AdminClient(ctx.app);
      assert.equal((await client.signIn(admin.email)).statusCode, 303);
    });
    after(() => ctx.close());
    beforeEach(async () => {
      receiver = await Receiver.start();
    });
    afterEach(() => receiver.close());

    const stored = async (endpointId: string) => webhookRepository.findById(ctx.db, endpointId);
    const history = (endpointId: string, account = accountId) =>
      ctx.runtime.services.webhooks.history(endpointId, account, 100);

    /** Adds an endpoint with the list page's form; returns its id, the secret its page showed once, and that page. */
    async function createThroughPanel(
      form: Record<string, string> = {},
    ): Promise<{ id: string; secret: string; page: string }> {
      const list = await client.get(WEBHOOKS);
      const res = await client.submit(list.body, WEBHOOKS, { url: receiver.url(), events: '*', ...form });
      assert.equal(res.statusCode, 303);
      const location = String(res.headers.location);
      if (!new RegExp(`^${WEBHOOKS}/[0-9a-f-]{36}$`).test(location))
        assert.fail(
          `not added: ${/Nothing was added|The endpoint was not added[^<]*/.exec((await client.get(location)).body)?.[0]}`,
        );
      assert.match(location, new RegExp(`^${WEBHOOKS}/[0-9a-f-]{36}$`));
      const page = (await client.get(location)).body;
      const secret = fieldValue(page, 'new-webhook-secret');
      assert.ok(secret !== undefined, 'the new secret is shown');
      return { id: location.slice(WEBHOOKS.length + 1), secret, page };
    }

    /** Submits a form of the endpoint's page; returns the page the redirect leads to. */
    async function act(
      endpointId: string,
      action: string,
      form: Record<string, string> = {},
    ): Promise<{ res: LightMyRequestResponse; page: string }> {
      const detail = await client.get(`${WEBHOOKS}/${endpointId}`);
      const res = await client.submit(detail.body, `${WEBHOOKS}/${endpointId}/${action}`, form);
      assert.equal(res.statusCode, 303);
      return { res, page: (await client.get(String(res.headers.location))).body };
    }

    test('create: the secret is shown once on the new endpoint’s page, stored sealed, and the creation audited', async () => {
      const { id, secret, page } = await createThroughPanel({
        events: ' incident.* , user.deleted ',
        description: 'Warehouse <sync>',
      });
      assert.match(page, /Webhook endpoint added/);
      assert.match(page, /Copy this signing secret now\. It will not be shown again:/);
      assert.match(page, /data-copy-target="new-webhook-secret"/);
      assert.equal(page.match(SECRET)?.length, 1, 'the secret is on the page once');
      assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);

      const reload = await client.get(`${WEBHOOKS}/${id}`);
      assert.match(reload.headers['cache-control'] as string, /no-store/);
      assert.equal(reload.body.match(SECRET), null, 'a reload does not show the secret');
      assert.equal((await client.get(WEBHOOKS)).body.match(SECRET), null);

      const row = await stored(id);
      assert.equal(row?.account_id, accountId);
      assert.equal(row?.url, receiver.url());
      assert.deepEqual(JSON.parse(row?.events ?? ''), ['incident.*', 'user.deleted']);
      assert.equal(row?.description, 'Warehouse <sync>');
      assert.equal(row?.state, 'active');
      assert.equal(row?.created_by, admin.id);
      assert.ok(!JSON.stringify(row).includes(secret.slice(6)), 'the raw secret is not stored');

      const events = await history(id);
      assert.deepEqual(
        events.map((event) => [event.action, event.actor]),
        [['created', admin.id]],
      );
      assert.match(text(reload.body), /Created by Wendy Webhooks/);
      assert.match(
        reload.body,
        /<td data-label="Who">Wendy Webhooks<\/td>\s*<td data-label="Action">Created<\/td>/,
      );
    });

    test('the list shows each endpoint with its state, URL, event filter, lag and last delivery', async () => {
      const { id } = await createThroughPanel({ events: 'incident.*', description: 'BI' });
      const list = await client.get(WEBHOOKS);
      assert.equal(list.statusCode, 200);
      assert.match(list.body, /<h1>Webhooks<\/h1>/);
      assert.match(list.body, /<li>Settings<\/li><li>Integrations<\/li><li>Webhooks<\/li>/);
      assert.match(
        list.body,
        /<a href="\/admin\/settings\/integrations\/webhooks" aria-current="page">Webhooks<\/a>/,
      );
      const row = rowOf(list.body, id);
      assert.match(row, new RegExp(`<a href="${WEBHOOKS}/${id}"><code>${receiver.url()}</code></a>`));
      assert.match(row, /<span class="muted">BI<\/span>/);
      assert.match(row, /data-label="Events"><code>incident\.\*<\/code>/);
      assert.match(row, /data-label="State"><span class="badge badge-active">Active<\/span><\/td>/);
      assert.match(row, /data-label="Lag">0 changes/);
      assert.match(row, /data-label="Last delivery">Never/);

      // The Integrations page links here, and here back.
      const integrations = (await client.get('/admin/settings/integrations')).body;
      assert.match(integrations, /<nav aria-label="Integrations" class="subnav">/);
      assert.match(integrations, new RegExp(`<a href="${WEBHOOKS}">Webhooks</a>`));
    });

    test('the detail page shows the reason, failing since, next attempt, lag, cursor, the last 50 attempts and the history', async () => {
      const { id } = await createThroughPanel();
      await seedIncidents(ctx.db, accountId, 3);
      const failingSince = '2026-03-01T10:00:00.000Z';
      const nextAttempt = '2026-03-01T12:30:00.000Z';
      await webhookRepository.update(ctx.db, id, {
        failing_since: failingSince,
        failed_attempts: 4,
        next_attempt_at: nextAttempt,
        last_attempt_at: '2026-03-01T11:00:00.000Z',
        last_status: 503,
        updated_at: new Date().toISOString(),
      });
      const attempt = (i: number) => ({
        endpoint_id: id,
        webhook_id: `msg_${i}`,
        type: 'incident.created',
        seq: i,
        // Within the log's 30 days: older attempts are not kept.
        at: new Date(Date.now() - (60 - i) * 60_000).toISOString(),
        status: i % 2 === 0 ? 503 : null,
        duration_ms: 100 + i,
        error: i % 2 === 0 ? `HTTP 503: <b>down</b> ${i}` : 'ECONNREFUSED: connect ECONNREFUSED',
      });
      await webhookRepository.recordAttempts(
        ctx.db,
        Array.from({ length: 60 }, (_, i) => attempt(i)),
      );

      const view = await ctx.runtime.services.webhooks.show(id);
      const page = (await client.get(`${WEBHOOKS}/${id}`)).body;
      assert.match(page, /<dd id="webhook-disabled-reason">Not disabled<\/dd>/);
      assert.match(page, new RegExp(`<dd id="webhook-failing-since"><time datetime="${failingSince}">`));
      assert.match(page, new RegExp(`<dd id="webhook-next-attempt"><time datetime="${nextAttempt}">`));
      assert.match(page, /<dd id="webhook-lag">3 changes not delivered yet<\/dd>/);
      // A cursor carries the second it was issued in, so the page's may differ from `view`'s in that alone.
      const shown = /<code id="webhook-cursor">([A-Za-z0-9_-]+)<\/code>/.exec(page)?.[1] ?? '';
      const cursors = await ctx.runtime.services.changeFeed.cursors();
      const held = cursors.decode(accountId, shown);
      const expected = cursors.decode(accountId, view.cursor);
      assert.ok(held !== null && expected !== null, `the page shows a cursor of the account: "${shown}"`);
      assert.deepEqual([held.position, held.bound], [expected.position, expected.bound]);
      assert.ok(Math.abs(held.issuedAt - expected.issuedAt) <= 5, 'issued when the page was made');
      assert.match(page, /<span class="badge badge-warning">Failing<\/span>/);
      assert.match(text(page), /Last delivery 2026-03-01 11:00 UTC ?: HTTP 503/);

      const log = page.slice(
        page.indexOf('id="webhook-attempts-table"'),
        page.indexOf('</table>', page.indexOf('id="webhook-attempts-table"')),
      );
      const rows = log.split('<tr>').slice(2);
      assert.equal(rows.length, 50, 'the last 50 attempts');
      assert.match(
        rows[0] ?? '',
        /<code>msg_59<\/code>[\s\S]*<code>incident\.created<\/code>[\s\S]*No answer <span class="badge badge-failed">Failed<\/span>[\s\S]*159 ms[\s\S]*ECONNREFUSED/,
      );
      assert.match(
        rows[1] ?? '',
        /<code>msg_58<\/code>[\s\S]*HTTP 503 <span class="badge badge-failed">Failed<\/span>[\s\S]*HTTP 503: &lt;b&gt;down&lt;\/b&gt; 58/,
      );
      assert.match(rows[49] ?? '', /<code>msg_10<\/code>/);
      assert.doesNotMatch(page, /<b>down<\/b>/, 'what a receiver answered is escaped');

      const list = rowOf((await client.get(WEBHOOKS)).body, id);
      assert.match(list, /data-label="Lag">3 changes/);
      assert.match(list, /Failing/);
      assert.match(text(list), /2026-03-01 11:00 UTC ?: HTTP 503/);

      await ctx.runtime.services.webhooks.disable(id, 'system', {
        reason: 'failing since 2026-03-01 (last: HTTP 503)',
      });
      const disabled = (await client.get(`${WEBHOOKS}/${id}`)).body;
      assert.match(
        disabled,
        /<dd id="webhook-disabled-reason">failing since 2026-03-01 \(last: HTTP 503\)<\/dd>/,
      );
      assert.match(
        disabled,
        /<td data-label="Who">automatic \(delivery\)<\/td>\s*<td data-label="Action">Disabled<\/td>/,
      );
    });

    test('send test event: a signed webhook.test reaches the receiver, and the result is shown and logged', async () => {
      const { id, secret } = await createThroughPanel();
      let { page } = await act(id, 'test');
      await receiver.waitFor(1);
      const [received] = receiver.received;
      assert.ok(received);
      assert.equal(received.json.type, 'webhook.test');
      assert.deepEqual(verify(secret, received), received.json, 'signed with the secret the page showed');
      const webhookId = String(received.headers['webhook-id']);
      assert.match(page, new RegExp(`Test event ${webhookId} delivered: HTTP 204 in \\d+ ms\\.`));
      assert.match(
        page,
        new RegExp(`<code>${webhookId}</code>[\\s\\S]*<code>webhook\\.test</code>[\\s\\S]*HTTP 204`),
      );

      receiver.answer = (_received, response) => {
        response.statusCode = 500;
        response.end('receiver broke');
      };
      ({ page } = await act(id, 'test'));
      assert.match(
        page,
        /class="flash flash-error" role="alert">Test event msg_test_\S+ failed after \d+ ms: HTTP 500: receiver broke\./,
      );
      assert.match(page, /HTTP 500 <span class="badge badge-failed">Failed<\/span>/);
      assert.equal((await webhookRepository.listAttempts(ctx.db, id, 10)).length, 2);
    });

    test('disable and enable change the endpoint and are audited; repeating one changes nothing', async () => {
      const { id } = await createThroughPanel();
      let { page } = await act(id, 'disable');
      assert.match(page, /Webhook endpoint disabled: nothing is sent to it until it is enabled/);
      assert.equal((await stored(id))?.state, 'disabled');
      assert.equal((await stored(id))?.disabled_reason, 'disabled by a Super Admin');
      assert.match(page, /<dd id="webhook-disabled-reason">disabled by a Super Admin<\/dd>/);
      assert.match(page, /Enable endpoint<\/button>/);

      ({ page } = await act(id, 'disable'));
      assert.match(
        page,
        /Nothing was changed: the webhook endpoint &quot;[0-9a-f-]+&quot; is already disabled\./,
      );

      ({ page } = await act(id, 'enable'));
      assert.match(page, /Webhook endpoint enabled: deliveries resume after the last change it received\./);
      assert.equal((await stored(id))?.state, 'active');
      assert.equal((await stored(id))?.disabled_reason, null);
      assert.match(page, /Disable endpoint<\/button>/);

      assert.deepEqual(
        (await history(id)).map((event) => [event.action, event.actor]),
        [
          ['enabled', admin.id],
          ['disabled', admin.id],
          ['created', admin.id],
        ],
      );
    });

    test('rotate secret: the new secret is shown once and signs; the overlap is as asked; audited', async () => {
      const { id, secret: first } = await createThroughPanel();
      const before = await stored(id);
      let { page } = await act(id, 'rotate-secret', { overlap_hours: '0' });
      assert.match(page, /Signing secret rotated/);
      assert.match(page, /No earlier secret signs any more\./);
      const second = fieldValue(page, 'new-webhook-secret');
      assert.ok(second !== undefined && second !== first);
      assert.equal(page.match(SECRET)?.length, 1);
      assert.equal((await client.get(`${WEBHOOKS}/${id}`)).body.match(SECRET), null, 'shown once');
      assert.notEqual((await stored(id))?.secret, before?.secret);
      assert.equal((await stored(id))?.previous_secret, null);

      await act(id, 'test');
      await receiver.waitFor(1);
      const [received] = receiver.received as [Received];
      assert.deepEqual(verify(second, received), received.json);
      assert.throws(() => verify(first, received), 'the old secret no longer signs');

      ({ page } = await act(id, 'rotate-secret', { overlap_hours: '48' }));
      const third = fieldValue(page, 'new-webhook-secret') as string;
      const until = (await stored(id))?.previous_secret_expires_at;
      assert.ok(until !== null && until !== undefined);
      assert.ok(Math.abs(Date.parse(until) - Date.now() - 48 * 3_600_000) < 60_000);
      assert.match(
        page,
        new RegExp(`Earlier secrets also sign every message, each until its own expiry: ${until}\\.`),
      );
      assert.match(text(page), /Previous secrets Each also signs until its own expiry: /);
      await act(id, 'test');
      await receiver.waitFor(2);
      const overlap = receiver.received[1] as Received;
      assert.deepEqual(verify(third, overlap), overlap.json);
      assert.deepEqual(verify(second, overlap), overlap.json, 'both sign during the overlap');

      const unchanged = (await stored(id))?.secret;
      ({ page } = await act(id, 'rotate-secret', { overlap_hours: 'a week' }));
      assert.match(page, /Nothing was changed: overlap must be a number of hours from 0 to 720/);
      assert.equal((await stored(id))?.secret, unchanged);
      assert.equal(page.match(SECRET), null);

      assert.deepEqual(
        (await history(id)).map((event) => [event.action, event.actor, event.detail]),
        [
          ['secret rotated', admin.id, `previous secret valid until ${until}`],
          ['secret rotated', admin.id, 'no overlap'],
          ['created', admin.id, `url ${receiver.url()}, events *`],
        ],
      );
    });

    test('resend moves the position to the cursor or to latest; a bad cursor changes nothing; audited', async () => {
      const { id } = await createThroughPanel();
      const start = (await stored(id))?.position ?? -1;
      await seedIncidents(ctx.db, accountId, 3);
      assert.equal((await ctx.runtime.services.webhooks.show(id)).lag, 3);

      let { page } = await act(id, 'resend', { cursor: 'latest' });
      assert.match(page, /Deliveries restart from the latest change: nothing is waiting to be sent\./);
      assert.equal((await stored(id))?.position, start + 3);
      assert.match(page, /<dd id="webhook-lag">0 changes not delivered yet<\/dd>/);

      const cursor = await ctx.runtime.services.changeFeed.cursorAfter(accountId, start + 1);
      ({ page } = await act(id, 'resend', { cursor: ` ${cursor} ` }));
      assert.match(page, /Resending from that cursor: up to 2 changes will be sent again, in order\./);
      assert.equal((await stored(id))?.position, start + 1);

      for (const [bad, message] of [
        ['not-a-cursor', /Nothing was changed: cursor is not a \/changes cursor of this account/],
        ['  ', /Nothing was changed: enter a cursor/],
        [
          await ctx.runtime.services.changeFeed.cursorAfter(await seedAccount(ctx.db), 0),
          /not a \/changes cursor of this account/,
        ],
      ] as const) {
        ({ page } = await act(id, 'resend', { cursor: bad }));
        assert.match(page, message);
        assert.equal((await stored(id))?.position, start + 1);
      }

      assert.deepEqual(
        (await history(id)).slice(0, 2).map((event) => [event.action, event.actor, event.detail]),
        [
          ['resend', admin.id, `from seq ${start + 1}`],
          ['resend', admin.id, `from seq ${start + 3} (latest)`],
        ],
      );
    });

    test('delete asks for confirmation, then removes the endpoint; audited', async () => {
      const { id } = await createThroughPanel();
      const confirmation = await client.get(`${WEBHOOKS}/${id}/delete`);
      assert.equal(confirmation.statusCode, 200);
      assert.match(confirmation.body, /Deleting is permanent\./);
      assert.equal((await stored(id))?.id, id, 'opening the confirmation deletes nothing');
      const res = await client.submit(confirmation.body, `${WEBHOOKS}/${id}/delete`);
      assert.equal(res.statusCode, 303);
      assert.equal(res.headers.location, WEBHOOKS);
      const list = (await client.get(WEBHOOKS)).body;
      assert.match(
        list,
        new RegExp(`Webhook endpoint ${receiver.url()} deleted: nothing more is sent to it\\.`),
      );
      assert.ok(!list.includes(`data-endpoint-id="${id}"`));
      assert.equal(await stored(id), undefined);
      assert.equal((await client.get(`${WEBHOOKS}/${id}`)).statusCode, 404);
      assert.deepEqual(
        (await history(id)).map((event) => [event.action, event.actor]),
        [
          ['deleted', admin.id],
          ['created', admin.id],
        ],
      );
    });

    test('past retention: the page says so, and enabling needs the confirmation that restarts it from latest', async () => {
      const { id } = await createThroughPanel();
      await act(id, 'disable');
      const account = await ctx.db
        .selectFrom('accounts')
        .select('data_version')
        .where('id', '=', accountId)
        .executeTakeFirstOrThrow();
      const head = Number(account.data_version) + 100;
      // The feed purged deletions past the endpoint's position, as CHANGES_RETENTION_DAYS would.
      await ctx.db
        .updateTable('accounts')
        .set({ changes_purged_seq: head - 1, data_version: head })
        .where('id', '=', accountId)
        .execute();
      try {
        const page = (await client.get(`${WEBHOOKS}/${id}`)).body;
        assert.match(page, /<h2 id="past-retention-heading">Past the feed's retention<\/h2>/);
        assert.match(page, /Past retention<\/span>/);
        assert.match(
          page,
          new RegExp(`<a class="button" href="${WEBHOOKS}/${id}/enable">Enable and restart from latest…</a>`),
        );
        assert.doesNotMatch(page, /Enable endpoint<\/button>/);
        assert.match(rowOf((await client.get(WEBHOOKS)).body, id), /Past retention/);

        // A plain enable (a forged or stale form) is refused.
        const refused = await client.submit(page, `${WEBHOOKS}/${id}/enable`);
        assert.equal(refused.statusCode, 303);
        assert.match(
          (await client.get(`${WEBHOOKS}/${id}`)).body,
          /Nothing was changed: its position is older than the changes feed keeps, so it can only restart from the latest change/,
        );
        assert.equal((await stored(id))?.state, 'disabled');

        const confirmation = await client.get(`${WEBHOOKS}/${id}/enable`);
        assert.equal(confirmation.statusCode, 200);
        assert.match(
          confirmation.body,
          /the changes made while it was stopped, deletions included, are never sent to it/,
        );
        assert.match(
          confirmation.body,
          /<input id="restart-confirm" name="from_latest" type="checkbox" value="confirmed" required>/,
        );
        await client.submit(confirmation.body, `${WEBHOOKS}/${id}/enable`, { from_latest: 'yes' });
        assert.equal((await stored(id))?.state, 'disabled', 'only the confirmation’s own value counts');

        const res = await client.submit(confirmation.body, `${WEBHOOKS}/${id}/enable`, {
          from_latest: 'confirmed',
        });
        assert.equal(res.statusCode, 303);
        assert.equal(res.headers.location, `${WEBHOOKS}/${id}`);
        const enabled = (await client.get(`${WEBHOOKS}/${id}`)).body;
        assert.match(
          enabled,
          /Webhook endpoint enabled from the latest change: the changes made while it was stopped are not sent\./,
        );
        assert.doesNotMatch(enabled, /past-retention-heading/);
        const row = await stored(id);
        assert.equal(row?.state, 'active');
        assert.equal(row?.position, head);
        const [event] = await history(id);
        assert.deepEqual(
          [event?.action, event?.actor, event?.detail],
          ['enabled', admin.id, `restarted from the head (seq ${head})`],
        );

        // Not needed (or offered) for an endpoint the feed still holds.
        const again = await client.get(`${WEBHOOKS}/${id}/enable`);
        assert.equal(again.statusCode, 303);
        assert.equal(again.headers.location, `${WEBHOOKS}/${id}`);
      } finally {
        await ctx.db
          .updateTable('accounts')
          .set({ changes_purged_seq: 0 })
          .where('id', '=', accountId)
          .execute();
      }
    });

    test('edit: URL, events and description change; secret, position and state stay; audited without a secret', async () => {
      const { id, secret } = await createThroughPanel({ description: 'Before' });
      await seedIncidents(ctx.db, accountId, 2);
      await act(id, 'disable');
      const before = await stored(id);
      const page = (await client.get(`${WEBHOOKS}/${id}`)).body;
      // The form holds the endpoint's own values.
      assert.match(page, new RegExp(`<form method="post" action="${WEBHOOKS}/${id}/update"`));
      assert.match(page, new RegExp(`id="edit-webhook-url"[^>]*value="${receiver.url()}"`));
      assert.match(page, /id="edit-webhook-events"[^>]*value="\*"/);
      assert.match(page, /id="edit-webhook-description"[^>]*value="Before"/);

      const moved = await Receiver.start();
      try {
        const { page: saved } = await act(id, 'update', {
          url: moved.url('/v2'),
          events: 'user.deleted, incident.*',
          description: 'After',
        });
        assert.match(
          saved,
          /class="flash flash-success"[^>]*>Webhook endpoint saved: deliveries go on from the same position/,
        );
        const after = await stored(id);
        assert.equal(after?.url, moved.url('/v2'));
        assert.deepEqual(JSON.parse(after?.events ?? ''), ['incident.*', 'user.deleted']);
        assert.equal(after?.description, 'After');
        // What it was told, where it stands and how it signs stay.
        assert.deepEqual(
          [after?.secret, after?.position, after?.known_through, after?.state, after?.disabled_reason],
          [before?.secret, before?.position, before?.known_through, 'disabled', before?.disabled_reason],
        );
        assert.match(saved, /<dd id="webhook-lag">2 changes not delivered yet<\/dd>/);

        await act(id, 'test');
        await moved.waitFor(1);
        assert.equal(receiver.received.length, 0, 'nothing goes to the old URL');
        assert.deepEqual(verify(secret, moved.received[0] as Received), moved.received[0]?.json);

        const [edited] = await history(id);
        assert.equal(edited?.action, 'updated');
        assert.equal(edited?.actor, admin.id);
        assert.equal(
          edited?.detail,
          `url ${receiver.url()} → ${moved.url('/v2')}; events * → incident.*,user.deleted; description "Before" → "After"`,
        );
        const shown = (await client.get(`${WEBHOOKS}/${id}`)).body;
        assert.match(shown, /<td data-label="Action">Edited<\/td>/);
        assert.equal(shown.match(SECRET), null, 'no secret on the page');
      } finally {
        await moved.close();
      }
    });

    test('edit: bad input, no change and another endpoint’s URL and filter are shown as messages and change nothing', async () => {
      const { id: first } = await createThroughPanel({ events: 'incident.*' });
      const { id } = await createThroughPanel({ url: receiver.url('/second'), events: 'incident.*' });
      const rowBefore = await stored(id);
      const historyBefore = await history(id);
      const cases: [Record<string, string>, RegExp][] = [
        [{ url: 'not a url', events: 'incident.*' }, /url must be an absolute https:\/\/ URL/],
        [
          { url: receiver.url('/second'), events: 'incident.nope' },
          /unknown event type &quot;incident\.nope&quot;/,
        ],
        [
          { url: receiver.url('/second'), events: 'incident.*', description: 'x'.repeat(201) },
          /description must be at most 200 characters/,
        ],
        [
          { url: receiver.url('/second'), events: 'incident.created, incident.*' },
          /nothing to change: the endpoint already has this URL, these events and this description/,
        ],
        [
          { url: receiver.url(), events: 'incident.*' },
          new RegExp(
            `the account already has a webhook endpoint for this URL and these events \\(${first}\\): edit or delete that one instead`,
          ),
        ],
      ];
      for (const [form, message] of cases) {
        const { page } = await act(id, 'update', form);
        assert.match(page, /class="flash flash-error" role="alert">Nothing was changed: /);
        assert.match(page, message);
      }
      assert.deepEqual(await stored(id), rowBefore);
      assert.deepEqual(await history(id), historyBefore);
    });

    test('bounds: an endpoint past WEBHOOK_MAX_ENDPOINTS and a second one for a URL and filter are refused with a message, and nothing is added', async () => {
      const capped = await createTestContext(store, {
        WEBHOOKS_ALLOW_PRIVATE: 'true',
        WEBHOOK_MAX_ENDPOINTS: '3',
      });
      try {
        const account = await seedAccount(capped.db);
        const user = await seedUser(capped.db, account);
        const busy = new AdminClient(capped.app);
        assert.equal((await busy.signIn(user.email)).statusCode, 303);
        const add = async (url: string, events = '*') => {
          const list = await busy.get(WEBHOOKS);
          const res = await busy.submit(list.body, WEBHOOKS, { url, events });
          assert.equal(res.statusCode, 303);
          const location = String(res.headers.location);
          return { location, page: (await busy.get(location)).body };
        };
        const first = await add(receiver.url('/0'), 'incident.*');
        assert.match(first.location, new RegExp(`^${WEBHOOKS}/[0-9a-f-]{36}$`));
        // The same filter spelled otherwise is the same filter.
        const again = await add(receiver.url('/0'), ' incident.created , incident.* ');
        assert.equal(again.location, WEBHOOKS);
        assert.match(
          again.page,
          new RegExp(
            `class="flash flash-error" role="alert">The endpoint was not added: the account already has a webhook endpoint for this URL and these events \\(${first.location.slice(WEBHOOKS.length + 1)}\\): edit or delete that one instead\\.`,
          ),
        );
        // Another filter, or another URL, is another endpoint.
        assert.notEqual((await add(receiver.url('/0'), 'user.*')).location, WEBHOOKS);
        assert.notEqual((await add(receiver.url('/1'), 'incident.*')).location, WEBHOOKS);
        const over = await add(receiver.url('/2'));
        assert.equal(over.location, WEBHOOKS);
        assert.match(
          over.page,
          /class="flash flash-error" role="alert">The endpoint was not added: the account already has 3 webhook endpoints, the most it may have \(WEBHOOK_MAX_ENDPOINTS=3\): delete one before adding another\./,
        );
        assert.equal((await capped.runtime.services.webhooks.list(account)).length, 3);
        const audit = await capped.db
          .selectFrom('audit_events')
          .select('action')
          .where('account_id', '=', account)
          .execute();
        assert.equal(audit.length, 3, 'only the three creations audited');
      } finally {
        await capped.close();
      }
    });

    test('bad input is shown as a message and adds nothing', async () => {
      const count = async () => (await ctx.runtime.services.webhooks.list(accountId)).length;
      const before = await count();
      const cases: [Record<string, string>, RegExp][] = [
        [
          { url: 'not a url' },
          /The endpoint was not added: url must be an absolute https:\/\/ URL \(got &quot;not a url&quot;\)\./,
        ],
        [
          { url: 'ftp://example.com/x' },
          /The endpoint was not added: url must start with https:\/\/ or http:\/\//,
        ],
        [
          { events: 'incident.created, incident.nope' },
          /The endpoint was not added: unknown event type &quot;incident\.nope&quot;/,
        ],
        [
          { description: 'x'.repeat(201) },
          /The endpoint was not added: description must be at most 200 characters\./,
        ],
        [
          { description: 'BI\u0000sync' },
          /The endpoint was not added: description must not contain the NUL character \(\\u0000\)\./,
        ],
      ];
      for (const [form, message] of cases) {
        const list = await client.get(WEBHOOKS);
        const res = await client.submit(list.body, WEBHOOKS, { url: receiver.url(), events: '*', ...form });
        assert.equal(res.statusCode, 303);
        assert.equal(res.headers.location, WEBHOOKS);
        const page = (await client.get(WEBHOOKS)).body;
        assert.match(page, message);
        assert.match(page, /class="flash flash-error" role="alert"/);
      }
      const list = (await client.get(WEBHOOKS)).body;
      const lone = await client.submitJson(list, WEBHOOKS, {
        url: receiver.url(),
        events: '*',
        description: 'BI\ud800sync',
      });
      assert.equal(lone.statusCode, 303);
      assert.equal(lone.headers.location, WEBHOOKS);
      assert.match(
        (await client.get(WEBHOOKS)).body,
        /The endpoint was not added: description must be valid Unicode: it holds a lone surrogate \(\\ud800–\\udfff\)\./,
      );
      assert.equal(await count(), before);
    });

    test('a private or plain-http URL is refused when WEBHOOKS_ALLOW_PRIVATE is not set, and nothing is added', async () => {
      const strict = await createTestContext(store);
      try {
        const account = await seedAccount(strict.db);
        const user = await seedUser(strict.db, account);
        const strictClient = new AdminClient(strict.app);
        assert.equal((await strictClient.signIn(user.email)).statusCode, 303);
        const cases: [string, RegExp][] = [
          [
            'https://127.0.0.1/x',
            /The endpoint was not added: url refused: 127\.0\.0\.1 \(loopback\) is not a public address; webhooks go to public addresses only\./,
          ],
          ['https://10.1.2.3/hook', /url refused: 10\.1\.2\.3 \(RFC 1918 private\) is not a public address/],
          [
            'http://93.184.215.14/hook',
            /url must start with https:\/\/ \(got &quot;http:\/\/93\.184\.215\.14\/hook&quot;\); http:\/\/ is allowed only with WEBHOOKS_ALLOW_PRIVATE=true/,
          ],
        ];
        for (const [url, message] of cases) {
          const list = await strictClient.get(WEBHOOKS);
          const res = await strictClient.submit(list.body, WEBHOOKS, { url, events: '*' });
          assert.equal(res.statusCode, 303);
          assert.equal(res.headers.location, WEBHOOKS);
          assert.match((await strictClient.get(WEBHOOKS)).body, message);
        }
        assert.deepEqual(await strict.runtime.services.webhooks.list(account), []);
        assert.deepEqual(await strict.runtime.services.webhooks.history(randomUUID(), account, 10), []);
        const audit = await strict.db
          .selectFrom('audit_events')
          .select('id')
          .where('account_id', '=', account)
          .execute();
        assert.equal(audit.length, 0, 'nothing audited');
      } finally {
        await strict.close();
      }
    });

    test('an account without API access cannot add endpoints: refused with the reason, nothing added', async () => {
      const account = await seedAccount(ctx.db, { name: 'Planless' });
      const user = await seedUser(ctx.db, account);
      const planless = new AdminClient(ctx.app, '192.0.2.200');
      assert.equal((await planless.signIn(user.email)).statusCode, 303);
      const list = await planless.get(WEBHOOKS);
      assert.equal(list.statusCode, 200);
      await ctx.db.updateTable('accounts').set({ api_access: 0 }).where('id', '=', account).execute();
      const res = await planless.submit(list.body, WEBHOOKS, { url: receiver.url(), events: '*' });
      assert.equal(res.statusCode, 403);
      assert.match(res.body, /Access refused/);
      assert.match(
        res.body,
        /The plan of Planless does not include API access, so API keys and webhooks cannot be managed\./,
      );
      assert.deepEqual(await ctx.runtime.services.webhooks.list(account), []);
      // The service refuses it on its own too (the command line goes there directly).
      await assert.rejects(
        ctx.runtime.services.webhooks.create({
          accountId: account,
          url: receiver.url(),
          actor: user.id,
        }),
        /the plan of account .* does not include API access/,
      );
    });

    test("another account's endpoint is treated exactly like a missing one, and nothing changes", async () => {
      const other = await seedAccount(ctx.db);
      const { endpoint: foreign } = await ctx.runtime.services.webhooks.create({
        accountId: other,
        url: receiver.url('/foreign'),
        actor: 'cli',
      });
      const rowBefore = await stored(foreign.id);
      const missing = randomUUID();
      for (const suffix of ['', '/delete', '/enable']) {
        const [theirs, none] = [
          await client.get(`${WEBHOOKS}/${foreign.id}${suffix}`),
          await client.get(`${WEBHOOKS}/${missing}${suffix}`),
        ];
        assert.equal(theirs.statusCode, 404);
        assert.equal(none.statusCode, 404);
        assert.match(theirs.body, /Webhook endpoint not found/);
        assert.equal(theirs.body, none.body);
        assert.ok(!theirs.body.includes('/foreign'));
      }
      const page = (await client.get(WEBHOOKS)).body;
      for (const action of ENDPOINT_POSTS) {
        for (const endpointId of [foreign.id, missing]) {
          const res = await client.submit(page, `${WEBHOOKS}/${endpointId}/${action}`, {
            cursor: 'latest',
            overlap_hours: '0',
            from_latest: 'confirmed',
          });
          assert.equal(res.statusCode, 303, action);
          assert.equal(res.headers.location, WEBHOOKS);
          const shown = (await client.get(WEBHOOKS)).body;
          assert.match(
            shown,
            new RegExp(`Nothing was changed: no webhook endpoint with id &quot;${endpointId}&quot;\\.`),
          );
        }
      }
      assert.deepEqual(await stored(foreign.id), rowBefore);
      assert.equal(receiver.received.length, 0, 'no test event was sent to it');
      assert.deepEqual(
        (await history(foreign.id, other)).map((event) => event.action),
        ['created'],
      );
      assert.ok(!(await client.get(WEBHOOKS)).body.includes(foreign.id), 'not listed');
    });

    /** The rows of the delivery log's table on an endpoint's page, each from its `<tr>`. */
    function logRows(page: string): string[] {
      const start = page.indexOf('id="webhook-attempts-table"');
      if (start < 0) return [];
      return page.slice(start, page.indexOf('</table>', start)).split('<tr>').slice(2);
    }

    /** The link of each listed attempt to its page. */
    const attemptLinks = (page: string) =>
      [...page.matchAll(/<a href="(\/admin\/settings\/integrations\/webhooks\/[^"]+\/attempts\/\d+)">/g)].map(
        (match) => match[1] as string,
      );

    test('the delivery log: filtered by outcome and event type; each attempt’s page shows its request and response, never a secret', async () => {
      receiver.answer = (_received, response) => {
        response.setHeader('x-receiver-trace', 'trace-1');
        response.statusCode = 200;
        response.end('{"ok":true,"note":"<b>thanks</b>"}');
      };
      const { id, secret } = await createThroughPanel({ url: receiver.url('/log') });
      await act(id, 'test');
      await receiver.waitFor(1);
      const sent = receiver.received[0] as Received;
      const at = new Date().toISOString();
      await webhookRepository.recordAttempts(ctx.db, [
        {
          endpoint_id: id,
          webhook_id: 'msg_panel_timeout',
          type: 'incident.updated',
          seq: 1,
          at,
          status: null,
          duration_ms: 2000,
          error: 'no answer within 2000 ms',
          outcome: 'timeout',
          request_headers: '{"webhook-id":"msg_panel_timeout"}',
          request_body: '{"type":"incident.updated"}',
        },
        // As the release before the log kept requests wrote it.

        {
          endpoint_id: id,
          webhook_id: 'msg_panel_500',
          type: 'user.created',
          seq: 2,
          at,
          status: 500,
          duration_ms: 12,
          error: 'HTTP 500',
          outcome: null,
        },
      ]);

      const page = (await client.get(`${WEBHOOKS}/${id}`)).body;
      assert.equal(logRows(page).length, 3);
      assert.match(page, /<select id="log-outcome" name="outcome">/);
      const only = async (query: string) =>
        logRows((await client.get(`${WEBHOOKS}/${id}?${query}`)).body).map(
          (row) => /<code>(msg_[^<]+)<\/code>/.exec(row)?.[1],
        );
      assert.deepEqual(await only('outcome=failure'), ['msg_panel_500', 'msg_panel_timeout']);
      assert.deepEqual(await only('outcome=timeout'), ['msg_panel_timeout']);
      assert.deepEqual(await only('outcome=success'), [sent.headers['webhook-id']]);
      assert.deepEqual(await only('type=user.*'), ['msg_panel_500']);
      assert.deepEqual(await only('type=incident.*%2Cwebhook.test&outcome=failure'), ['msg_panel_timeout']);
      const filtered = (await client.get(`${WEBHOOKS}/${id}?outcome=timeout&type=incident.*`)).body;
      assert.match(filtered, /<option value="timeout" selected>/);
      assert.match(filtered, /<input id="log-type" name="type" type="text" value="incident\.\*"/);
      assert.match(filtered, /Show every attempt/);
      assert.match(
        (await client.get(`${WEBHOOKS}/${id}?type=user.deleted`)).body,
        /No attempt in the log matches this filter\./,
      );
      const refused = (await client.get(`${WEBHOOKS}/${id}?outcome=sometimes`)).body;
      assert.match(refused, /The filter was not applied: outcome must be one of success, failure,/);
      assert.equal(logRows(refused).length, 3, 'the whole log instead');

      const links = attemptLinks(page);
      assert.equal(links.length, 3);
      const detail = await client.get(links[2] as string);
      assert.equal(detail.statusCode, 200);
      assert.match(detail.headers['cache-control'] as string, /no-store/);
      const body = detail.body;
      assert.match(body, new RegExp(`<h1>Delivery attempt <code>${sent.headers['webhook-id']}</code></h1>`));
      for (const name of ['webhook-id', 'webhook-timestamp', 'webhook-signature', 'user-agent']) {
        const value = String(sent.headers[name]).replaceAll('+', '\\+');
        assert.match(body, new RegExp(`<dt><code>${name}</code></dt><dd><code>${value}</code></dd>`), name);
      }
      assert.match(
        body,
        /<pre class="payload" id="attempt-request-body"[^>]*><code>\{\n {2}&quot;type&quot;: &quot;webhook\.test&quot;/,
      );
      assert.match(body, /<p id="attempt-response-status">HTTP 200<\/p>/);
      assert.match(body, /<dt><code>x-receiver-trace<\/code><\/dt><dd><code>trace-1<\/code><\/dd>/);
      assert.match(body, /&quot;note&quot;: &quot;&lt;b&gt;thanks&lt;\/b&gt;&quot;/, 'the answer, escaped');
      assert.match(body, /Redeliver this event<\/button>/);
      const timeout = (await client.get(links[1] as string)).body;
      assert.match(timeout, /No answer came: no answer within 2000 ms\./);
      assert.match(timeout, /<span class="muted">\(timeout\)<\/span>/);
      const legacy = (await client.get(links[0] as string)).body;
      assert.match(legacy, /Not kept: this attempt was logged before the delivery log kept requests\./);
      assert.match(
        legacy,
        /HTTP 500 <span class="badge badge-failed">Failed<\/span> <span class="muted">\(http_error\)<\/span>/,
      );
      assert.doesNotMatch(legacy, /Redeliver this event/, 'no body to send again');

      const key = secret.slice('whsec_'.length);
      for (const shown of [page, filtered, body, timeout, legacy])
        assert.ok(!shown.includes(key), 'never the secret');
      const other = await createThroughPanel({ url: receiver.url('/other') });
      for (const url of [
        `${WEBHOOKS}/${id}/attempts/999999999`,
        `${WEBHOOKS}/${other.id}/attempts/${links[2]?.split('/').at(-1)}`,
        `${WEBHOOKS}/${id}/attempts/abc`,
      ]) {
        const res = await client.get(url);
        assert.equal(res.statusCode, 404, url);
        assert.match(res.body, /The delivery log of this endpoint has no such attempt/);
      }
    });

    test('redeliver from an attempt’s page: the same webhook-id and body, a new signature the receiver verifies; logged and audited', async () => {
      const { id, secret } = await createThroughPanel({ url: receiver.url('/redeliver') });
      await act(id, 'test');
      await receiver.waitFor(1);
      const first = receiver.received[0] as Received;
      const before = await stored(id);
      const [link] = attemptLinks((await client.get(`${WEBHOOKS}/${id}`)).body);
      const detail = (await client.get(link as string)).body;
      const webhookId = /name="webhook_id" value="([^"]+)"/.exec(detail)?.[1];
      assert.equal(webhookId, first.headers['webhook-id']);
      const res = await client.submit(detail, `${WEBHOOKS}/${id}/redeliver`, {
        webhook_id: webhookId as string,
      });
      assert.equal(res.statusCode, 303);
      assert.equal(res.headers.location, `${WEBHOOKS}/${id}`);
      const page = (await client.get(String(res.headers.location))).body;
      assert.match(
        page,
        new RegExp(`Event ${webhookId} redelivered: HTTP 204 in \\d+ ms\\. The position did not move\\.`),
      );
      await receiver.waitFor(2);
      const again = receiver.received[1] as Received;
      assert.equal(again.headers['webhook-id'], webhookId);
      assert.equal(again.body, first.body);
      assert.deepEqual(verify(secret, again), JSON.parse(first.body));
      assert.equal(logRows(page).length, 2, 'logged');
      assert.equal((await stored(id))?.position, before?.position);
      assert.deepEqual(
        (await history(id)).map((event) => [event.action, event.actor, event.detail]),
        [
          ['redelivered', admin.id, `${webhookId} (webhook.test): HTTP 204`],
          ['created', admin.id, `url ${receiver.url('/redeliver')}, events *`],
        ],
      );
      assert.match(page, /<td data-label="Action">Redelivered an event<\/td>/);

      const { page: unknown } = await act(id, 'redeliver', { webhook_id: 'msg_not_in_the_log' });
      assert.match(
        unknown,
        /Nothing was changed: the delivery log of webhook endpoint &quot;[0-9a-f-]+&quot; holds no event with webhook id &quot;msg_not_in_the_log&quot;/,
      );
      assert.equal(receiver.received.length, 2);
      assert.equal((await history(id)).length, 2);
    });

    test('skip: a failing endpoint’s page names the event it is stuck on; the button passes it and is audited; refused when not stuck', async () => {
      const { id } = await createThroughPanel({ url: receiver.url('/skip') });
      let page = (await client.get(`${WEBHOOKS}/${id}`)).body;
      assert.doesNotMatch(page, /Skip this event/, 'not failing: no skip');
      const { page: refused } = await act(id, 'skip');
      assert.match(
        refused,
        /Nothing was changed: the webhook endpoint &quot;[0-9a-f-]+&quot; is not stuck on an event: its deliveries are not failing\./,
      );

      const position = (await stored(id))?.position ?? 0;
      await seedIncidents(ctx.db, accountId, 2);
      const failingSince = new Date(Date.now() - 120_000).toISOString();
      await webhookRepository.update(ctx.db, id, {
        failing_since: failingSince,
        failed_attempts: 2,
        next_attempt_at: new Date(Date.now() + 600_000).toISOString(),
        updated_at: new Date().toISOString(),
      });
      page = (await client.get(`${WEBHOOKS}/${id}`)).body;
      const stuck =
        /<p id="webhook-stuck">Failing on <code>(msg_[^<]+)<\/code>: <code>incident\.created<\/code> of <code>([0-9a-f-]+)<\/code> \(seq (\d+)\)\.<\/p>/.exec(
          page,
        );
      assert.ok(stuck !== null, 'the event it is stuck on is named');
      assert.equal(Number(stuck[3]), position + 1);

      const { page: after } = await act(id, 'skip');
      assert.match(
        after,
        new RegExp(
          `Skipped ${stuck[1]} \\(incident\\.created of ${stuck[2]}, seq ${position + 1}\\): the next event is sent at once\\.`,
        ),
      );
      const row = await stored(id);
      assert.equal(row?.position, position + 1);
      assert.equal(row?.failing_since, null);
      assert.doesNotMatch(after, /Skip this event/);
      assert.deepEqual((await history(id)).map((event) => [event.action, event.actor]).slice(0, 1), [
        ['skipped', admin.id],
      ]);
      assert.match(after, /<td data-label="Action">Skipped an event<\/td>/);
    });

    test('an endpoint id no store can hold is not found, as any unknown one is', async () => {
      for (const suffix of ['', '/delete', '/enable']) {
        const res = await client.get(`${WEBHOOKS}/%00${suffix}`);
        assert.equal(res.statusCode, 404);
        assert.match(res.body, /This account has no webhook endpoint with that id\./);
      }
      const page = (await client.get(WEBHOOKS)).body;
      for (const action of ENDPOINT_POSTS) {
        const res = await client.submit(page, `${WEBHOOKS}/%00/${action}`, { cursor: 'latest' });
        assert.equal(res.statusCode, 303, action);
        assert.equal(res.headers.location, WEBHOOKS);
        assert.match((await client.get(WEBHOOKS)).body, /Nothing was changed: no webhook endpoint with id/);
      }
    });

    describeAdminRouteAccess(
      'the webhook pages',
      () => ({ ctx, accountId }),
      async () => {
        const { id } = await createThroughPanel({ description: 'Guarded endpoint' });
        // Another URL: an account has one endpoint per URL and event filter.
        const { id: stopped } = await createThroughPanel({
          url: receiver.url('/stopped'),
          description: 'Guarded endpoint, stopped',
        });
        await act(stopped, 'disable');
        // An event in the log to redeliver, and one the endpoint is stuck on to skip.
        await webhookRepository.recordAttempts(ctx.db, [
          {
            endpoint_id: id,
            webhook_id: 'msg_guarded',
            type: 'webhook.test',
            seq: null,
            at: new Date().toISOString(),
            status: 204,
            duration_ms: 5,
            error: null,
            request_headers: '{"webhook-id":"msg_guarded"}',
            request_body: '{"type":"webhook.test"}',
            response_headers: '{}',
            response_body: '',
            outcome: 'success',
          },
        ]);
        const [attempt] = await webhookRepository.listAttempts(ctx.db, id, 1);
        await seedIncidents(ctx.db, accountId, 1);
        await webhookRepository.update(ctx.db, id, {
          failing_since: new Date().toISOString(),
          updated_at: new Date().toISOString(),
        });
        // Every field any endpoint form reads, so each would act if let through; `enable` goes to
        // the disabled endpoint.
        const form = {
          url: receiver.url(),
          cursor: 'latest',
          overlap_hours: '0',
          from_latest: 'confirmed',
          webhook_id: 'msg_guarded',
        };
        return {
          hidden: [receiver.url(), 'Guarded endpoint'],
          unchanged: () =>
            ctx.db
              .selectFrom('webhook_endpoints')
              .selectAll()
              .where('account_id', '=', accountId)
              .orderBy('id')
              .execute(),
          stillWorks: async () => assert.equal(receiver.received.length, 0, 'no test event was sent'),
          routes: [
            { method: 'GET', url: WEBHOOKS },
            { method: 'GET', url: `${WEBHOOKS}/${id}` },
            { method: 'GET', url: `${WEBHOOKS}/${id}/delete` },
            { method: 'GET', url: `${WEBHOOKS}/${id}/attempts/${attempt?.id}` },
            { method: 'GET', url: `${WEBHOOKS}/${stopped}/enable` },
            { method: 'POST', url: WEBHOOKS, form: { ...form, events: '*' } },
            ...ENDPOINT_POSTS.map((action): AdminRoute => ({
              method: 'POST',
              url: `${WEBHOOKS}/${action === 'enable' ? stopped : id}/${action}`,
              form,
            })),
          ],
        };
      },
    );
  });
}
