import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import type { Selectable } from 'kysely';
import type { AdminSessionsTable } from '../../../src/db/schema.ts';
import type { TestContext } from '../../helpers.ts';
import { AdminClient, csrfTokenOf, type SeededUser, seedUser } from './admin-helpers.ts';

/**
 * The access rules every route of the signed-in admin area shares, as one table of cases. A test
 * file declares each of its routes once, in a route table, and `describeAdminRouteAccess` runs
 * every case against every route:
 *
 * - signed out: a page sends to the sign-in form; a form (with or without a made-up token) is
 *   refused with 403;
 * - signed in, a form without the session's CSRF token or with a forged one: 403;
 * - the session's own CSRF token without the session cookie (what a cross-site form can send): 403;
 * - an Admin who is not a Super Admin (signed in as one, then demoted): 403 on every page and
 *   form, and the refusal ends the session;
 * - and, so that the refusals above are about access and not about a wrong address, a Super Admin
 *   is let through on every page.
 *
 * Every refused request must change nothing (the account's audit trail, the table's and the
 * route's snapshots are equal before and after it) and show nothing of the table's `hidden` texts.
 */

export interface AdminRoute {
  method: 'GET' | 'POST';
  url: string;
  /** The fields a browser would post, without `_csrf`: what the form would do if let through. */
  form?: Record<string, string>;
  /** A snapshot of what this route could change; equal before and after every refused request. */
  unchanged?: () => Promise<unknown>;
}

export interface AdminRouteTable {
  routes: AdminRoute[];
  /** A snapshot of what any of the routes could change, checked like a route's. */
  unchanged?: () => Promise<unknown>;
  /** Texts of the routes' subjects (a name, a secret, a URL) that no refusal may show. */
  hidden?: string[];
  /** Run after every case: what the refused requests must not have broken (a key still works). */
  stillWorks?: () => Promise<void>;
}

export interface PanelUnderTest {
  ctx: Pick<TestContext, 'app' | 'db'>;
  /** The account whose subjects the routes reach; the cases' Super Admin belongs to it. */
  accountId: string;
}

const SIGN_IN = '/admin/sign-in';
const SESSION_COOKIE = 'sia_admin_session';
/** A page of the signed-in area, to read the session's CSRF token from. */
const ANY_PAGE = '/admin/settings/integrations';
const FORGED_TOKEN = 'forged-token-forged-token-forged-token-0000';
const MADE_UP_TOKEN = 'no-session-no-token';
const CSRF_REFUSED = /Invalid or missing CSRF token/;
const ROLE_REFUSED = /Managing API keys and webhooks requires the Super Admin role; your role is Admin\./;
/** Where the cases' requests come from, apart from the test files' own clients. */
const ADDRESS = '198.51.100.60';

const label = (route: AdminRoute): string => `${route.method} ${route.url}`;

function assertCsrfRefused(res: LightMyRequestResponse, route: AdminRoute): void {
  assert.equal(res.statusCode, 403, label(route));
  assert.match(res.body, CSRF_REFUSED, label(route));
}

/**
 * Runs the shared access cases against the routes of `table`. Call it inside the test file's
 * `describe`, after its hooks: `panel` is read once its `before` has run, and `table` is called
 * at the start of every case, so each case gets subjects of its own (and the file's `beforeEach`
 * state, such as a webhook receiver).
 */
export function describeAdminRouteAccess(
  name: string,
  panel: () => PanelUnderTest,
  table: () => Promise<AdminRouteTable>,
  /** Whether the table has forms (POST routes): the CSRF cases run only where it does. */
  { forms = true }: { forms?: boolean } = {},
): void {
  describe(`access to ${name}`, () => {
    let ctx: PanelUnderTest['ctx'];
    let accountId: string;
    let superAdmin: SeededUser;
    let browser: AdminClient;
    let session: Selectable<AdminSessionsTable>;
    let cookies: Map<string, string>;
    let csrfToken: string;

    // One sign-in for all the cases (a sign-in costs a real scrypt); each case that needs the
    // session puts it back as it was, since a role refusal ends it.
    before(async () => {
      ({ ctx, accountId } = panel());
      superAdmin = await seedUser(ctx.db, accountId, { name: 'Route Access Checker' });
      browser = new AdminClient(ctx.app, ADDRESS);
      assert.equal((await browser.signIn(superAdmin.email)).statusCode, 303);
      csrfToken = csrfTokenOf((await browser.get(ANY_PAGE)).body);
      session = await ctx.db
        .selectFrom('admin_sessions')
        .selectAll()
        .where('user_id', '=', superAdmin.id)
        .executeTakeFirstOrThrow();
      cookies = new Map(browser.cookies);
    });

    async function resumeSession(): Promise<void> {
      await ctx.db.deleteFrom('admin_sessions').where('id_hash', '=', session.id_hash).execute();
      await ctx.db.insertInto('admin_sessions').values(session).execute();
      browser.cookies.clear();
      for (const [cookie, value] of cookies) browser.cookies.set(cookie, value);
    }

    const auditTrail = () =>
      ctx.db
        .selectFrom('audit_events')
        .selectAll()
        .where('account_id', '=', accountId)
        .orderBy('id')
        .execute();

    /** Sends a request that must be refused: it changes nothing and shows nothing hidden. */
    async function refused(
      access: AdminRouteTable,
      route: AdminRoute,
      send: () => Promise<LightMyRequestResponse>,
    ): Promise<LightMyRequestResponse> {
      const snapshot = async () => [
        await auditTrail(),
        await access.unchanged?.(),
        await route.unchanged?.(),
      ];
      const before = await snapshot();
      const res = await send();
      assert.deepEqual(await snapshot(), before, `${label(route)} changed nothing`);
      for (const text of access.hidden ?? []) {
        assert.ok(!res.body.includes(text), `${label(route)} shows nothing of “${text}”`);
      }
      return res;
    }

    test('signed out: every page sends to sign-in, every form is refused with 403, and nothing changes', async () => {
      const access = await table();
      assert.equal(
        access.routes.some((route) => route.method === 'POST'),
        forms,
        forms ? 'the table has forms' : 'the table has no forms: declare { forms: true }',
      );
      const stranger = new AdminClient(ctx.app, ADDRESS);
      for (const route of access.routes) {
        if (route.method === 'GET') {
          const res = await refused(access, route, () => stranger.get(route.url));
          assert.equal(res.statusCode, 303, label(route));
          assert.equal(res.headers.location, SIGN_IN, label(route));
          continue;
        }
        const form = route.form ?? {};
        for (const fields of [form, { ...form, _csrf: MADE_UP_TOKEN }]) {
          assertCsrfRefused(await refused(access, route, () => stranger.post(route.url, fields)), route);
        }
      }
      await access.stillWorks?.();
    });

    // The CSRF cases, where there are forms to post (a table of pages alone has none).
    if (forms) {
      test('signed in, a form post without the session CSRF token or with a forged one is refused with 403 and changes nothing', async () => {
        const access = await table();
        const posts = access.routes.filter((route) => route.method === 'POST');
        await resumeSession();
        for (const route of posts) {
          const form = route.form ?? {};
          for (const fields of [form, { ...form, _csrf: FORGED_TOKEN }]) {
            assertCsrfRefused(await refused(access, route, () => browser.post(route.url, fields)), route);
          }
        }
        await access.stillWorks?.();
      });

      test("the session's CSRF token without the session cookie (a cross-site form) is refused with 403 and changes nothing", async () => {
        const access = await table();
        const posts = access.routes.filter((route) => route.method === 'POST');
        for (const route of posts) {
          const res = await refused(access, route, () =>
            ctx.app.inject({
              method: 'POST',
              url: route.url,
              remoteAddress: ADDRESS,
              headers: { 'content-type': 'application/x-www-form-urlencoded' },
              payload: new URLSearchParams({ ...route.form, _csrf: csrfToken }).toString(),
            }),
          );
          assertCsrfRefused(res, route);
        }
        await access.stillWorks?.();
      });
    }

    test('an Admin (not a Super Admin) gets 403 on every page and form, the refusal ends the session, and nothing changes', async () => {
      const access = await table();
      // Signed in while a Super Admin, then demoted: the panel checks the role at every request.
      await ctx.db.updateTable('users').set({ role: 'admin' }).where('id', '=', superAdmin.id).execute();
      try {
        for (const route of access.routes) {
          await resumeSession();
          const res = await refused(access, route, () =>
            route.method === 'GET'
              ? browser.get(route.url)
              : browser.post(route.url, { ...route.form, _csrf: csrfToken }),
          );
          assert.equal(res.statusCode, 403, label(route));
          assert.match(res.body, /Access refused/, label(route));
          assert.match(res.body, ROLE_REFUSED, label(route));
          const ended = await ctx.db
            .selectFrom('admin_sessions')
            .select('id_hash')
            .where('id_hash', '=', session.id_hash)
            .executeTakeFirst();
          assert.equal(ended, undefined, `${label(route)}: the refusal ends the session`);
          assert.ok(!browser.cookies.has(SESSION_COOKIE), `${label(route)}: and clears its cookie`);
        }
      } finally {
        await ctx.db
          .updateTable('users')
          .set({ role: 'super_admin' })
          .where('id', '=', superAdmin.id)
          .execute();
      }
      await access.stillWorks?.();
    });

    test('a Super Admin is let through on every page, so the refusals are about access, not the address', async () => {
      const access = await table();
      await resumeSession();
      for (const route of access.routes) {
        if (route.method !== 'GET') continue;
        const res = await browser.get(route.url);
        const through =
          res.statusCode === 200 || (res.statusCode === 303 && res.headers.location !== SIGN_IN);
        assert.ok(through, `${label(route)}: ${res.statusCode} ${String(res.headers.location ?? '')}`);
      }
    });
  });
}
