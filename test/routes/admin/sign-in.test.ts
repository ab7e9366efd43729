import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { buildApp } from '../../../src/app.ts';
import { createTestContext, STORES, seedAccount, type TestContext } from '../../helpers.ts';
import { AdminClient, PASSWORD, type SeededUser, seedUser } from './admin-helpers.ts';

const INTEGRATIONS = '/admin/settings/integrations';

function setCookie(res: { headers: Record<string, unknown> }, name: string): string {
  const header = res.headers['set-cookie'];
  const all = Array.isArray(header) ? header : [header];
  const found = all.find((value) => typeof value === 'string' && value.startsWith(`${name}=`));
  assert.ok(found, `no Set-Cookie for ${name}`);
  return found as string;
}

for (const store of STORES) {
  describe(`admin sign-in (${store})`, () => {
    let ctx: TestContext;
    let accountId: string;
    let superAdmin: SeededUser;

    before(async () => {
      ctx = await createTestContext(store);
      accountId = await seedAccount(ctx.db);
      superAdmin = await seedUser(ctx.db, accountId, { name: 'Sam Super' });
    });
    after(() => ctx.close());

    test('signed out, the panel sends to the sign-in form', async () => {
      const client = new AdminClient(ctx.app);
      for (const url of ['/admin', INTEGRATIONS]) {
        let res = await client.get(url);
        while (res.statusCode === 303 && res.headers.location !== '/admin/sign-in') {
          res = await client.get(res.headers.location as string);
        }
        assert.equal(res.statusCode, 303, url);
        assert.equal(res.headers.location, '/admin/sign-in');
      }
      const form = await client.get('/admin/sign-in');
      assert.equal(form.statusCode, 200);
      assert.match(form.body, /<label for="email">Email<\/label>/);
      assert.match(setCookie(form, 'sia_admin_sign_in'), /HttpOnly; SameSite=Lax/);
    });

    test('sign-in sets an HttpOnly, SameSite=Lax session cookie for /admin and stores only its hash', async () => {
      const client = new AdminClient(ctx.app);
      const res = await client.signIn(superAdmin.email.toUpperCase());
      assert.equal(res.statusCode, 303);
      assert.equal(res.headers.location, INTEGRATIONS);
      const cookie = setCookie(res, 'sia_admin_session');
      assert.match(cookie, /; Path=\/admin/);
      assert.match(cookie, /; HttpOnly/);
      assert.match(cookie, /; SameSite=Lax/);
      assert.doesNotMatch(cookie, /Secure/, 'no Secure flag when served over plain HTTP');

      const rawId = client.cookies.get('sia_admin_session') as string;
      const rows = await ctx.db
        .selectFrom('admin_sessions')
        .selectAll()
        .where('user_id', '=', superAdmin.id)
        .execute();
      assert.ok(rows.some((row) => row.id_hash === createHash('sha256').update(rawId).digest('hex')));
      assert.ok(rows.every((row) => row.id_hash !== rawId));

      const page = await client.get(INTEGRATIONS);
      assert.equal(page.statusCode, 200);
      assert.match(page.body, /Sam Super/);
    });

    test('a new session id at every sign-in; the session the browser had before is deleted', async () => {
      const earlier = new AdminClient(ctx.app);
      await earlier.signIn(superAdmin.email);
      const first = earlier.cookies.get('sia_admin_session') as string;

      const client = new AdminClient(ctx.app);
      const form = await client.get('/admin/sign-in');
      client.cookies.set('sia_admin_session', first);
      const res = await client.submit(form.body, '/admin/sign-in', {
        email: superAdmin.email,
        password: PASSWORD,
      });
      assert.equal(res.statusCode, 303);
      const second = client.cookies.get('sia_admin_session') as string;
      assert.notEqual(first, second);

      const stale = await earlier.get(INTEGRATIONS);
      assert.equal(stale.statusCode, 303);
      assert.equal(stale.headers.location, '/admin/sign-in');
      assert.equal((await client.get(INTEGRATIONS)).statusCode, 200);
    });

    test('the session lives in the database: another instance of the app accepts it', async () => {
      const client = new AdminClient(ctx.app);
      await client.signIn(superAdmin.email);
      const other = await buildApp(ctx.config, ctx.runtime);
      try {
        const res = await other.inject({
          method: 'GET',
          url: INTEGRATIONS,
          cookies: { sia_admin_session: client.cookies.get('sia_admin_session') as string },
        });
        assert.equal(res.statusCode, 200);
        assert.match(res.body, /<h1>Integrations<\/h1>/);
      } finally {
        await other.close();
      }
    });

    test('sign-out ends the session in the database and clears the cookie', async () => {
      const client = new AdminClient(ctx.app);
      await client.signIn(superAdmin.email);
      const rawId = client.cookies.get('sia_admin_session') as string;
      const page = await client.get(INTEGRATIONS);
      const res = await client.submit(page.body, '/admin/sign-out');
      assert.equal(res.statusCode, 303);
      assert.equal(res.headers.location, '/admin/sign-in?signed-out=1');
      assert.match(setCookie(res, 'sia_admin_session'), /Max-Age=0/);
      const replay = await ctx.app.inject({
        method: 'GET',
        url: INTEGRATIONS,
        cookies: { sia_admin_session: rawId },
      });
      assert.equal(replay.statusCode, 303);
      const signedOut = await client.get('/admin/sign-in?signed-out=1');
      assert.match(signedOut.body, /You are signed out\./);
    });

    test('a wrong password or an unknown email gets the same refusal', async () => {
      for (const email of [superAdmin.email, 'nobody@example.test']) {
        const client = new AdminClient(ctx.app, '10.0.0.1');
        const res = await client.signIn(email, 'not the password');
        assert.equal(res.statusCode, 401);
        assert.match(res.body, /The email or password is incorrect\./);
        assert.equal(client.cookies.get('sia_admin_session'), undefined);
      }
    });

    test('an email no store can hold (NUL, a lone surrogate) belongs to no one: incorrect, as an unknown email', async () => {
      const client = new AdminClient(ctx.app, '10.0.0.2');
      const res = await client.signIn(`${superAdmin.email}\u0000`);
      assert.equal(res.statusCode, 401);
      assert.match(res.body, /The email or password is incorrect\./);
      const form = await client.get('/admin/sign-in');
      const lone = await client.submitJson(form.body, '/admin/sign-in', {
        email: `${superAdmin.email}\ud800`,
        password: PASSWORD,
      });
      assert.equal(lone.statusCode, 401);
      assert.match(lone.body, /The email or password is incorrect\./);
      assert.equal(client.cookies.get('sia_admin_session'), undefined);
    });

    test('the sign-in form is refused without its CSRF token, or with a token of another browser', async () => {
      const client = new AdminClient(ctx.app);
      await client.get('/admin/sign-in');
      const missing = await client.post('/admin/sign-in', { email: superAdmin.email, password: PASSWORD });
      assert.equal(missing.statusCode, 403);
      assert.match(missing.body, /Invalid or missing CSRF token/);

      const foreign = await new AdminClient(ctx.app).get('/admin/sign-in');
      const forged = await client.submit(foreign.body, '/admin/sign-in', {
        email: superAdmin.email,
        password: PASSWORD,
      });
      assert.equal(forged.statusCode, 403);
      assert.equal(client.cookies.get('sia_admin_session'), undefined);
    });

    test('after 5 failures for one email, that email is refused with 429 from any address, even with the right password', async () => {
      const target = await seedUser(ctx.db, accountId);
      for (let i = 1; i <= 5; i++) {
        const res = await new AdminClient(ctx.app, `10.1.0.${i}`).signIn(target.email, `wrong ${i}`);
        assert.equal(res.statusCode, 401);
      }
      const blocked = await new AdminClient(ctx.app, '10.1.0.99').signIn(target.email);
      assert.equal(blocked.statusCode, 429);
      assert.match(
        blocked.body,
        /Too many failed sign-in attempts\. Wait \d+ minutes? before trying again\./,
      );
      const retryAfter = Number(blocked.headers['retry-after']);
      assert.ok(retryAfter > 0 && retryAfter <= 900, `Retry-After ${retryAfter}`);

      const someoneElse = await new AdminClient(ctx.app, '10.1.0.99').signIn(superAdmin.email);
      assert.equal(someoneElse.statusCode, 303);
    });

    test('after 20 failures from one address, that address is refused with 429 whatever the email', async () => {
      for (let i = 1; i <= 20; i++) {
        const res = await new AdminClient(ctx.app, '10.2.0.1').signIn(`guess-${i}@example.test`, 'guess');
        assert.equal(res.statusCode, 401);
      }
      const blocked = await new AdminClient(ctx.app, '10.2.0.1').signIn(superAdmin.email);
      assert.equal(blocked.statusCode, 429);
      assert.match(blocked.body, /Too many failed sign-in attempts/);
      const elsewhere = await new AdminClient(ctx.app, '10.2.0.2').signIn(superAdmin.email);
      assert.equal(elsewhere.statusCode, 303);
    });

    test('only active, non-vendor Super Admins of an account with API access get in; others get a refusal page', async () => {
      const noApi = await seedAccount(ctx.db, { api_access: 0, name: 'Basic Plan Ltd' });
      const cases: [SeededUser, RegExp][] = [
        [
          await seedUser(ctx.db, accountId, { role: 'admin' }),
          /requires the Super Admin role; your role is Admin/,
        ],
        [await seedUser(ctx.db, accountId, { role: 'manager' }), /your role is Manager/],
        [await seedUser(ctx.db, accountId, { active: 0 }), /Your user account is deactivated/],
        [
          await seedUser(ctx.db, accountId, { vendor_support: 1 }),
          /Vendor support users cannot manage API keys/,
        ],
        [await seedUser(ctx.db, noApi), /The plan of Basic Plan Ltd does not include API access/],
      ];
      for (const [user, reason] of cases) {
        const client = new AdminClient(ctx.app, '10.3.0.1');
        const res = await client.signIn(user.email);
        assert.equal(res.statusCode, 403, user.email);
        assert.match(res.body, /<h1>Access refused<\/h1>/);
        assert.match(res.body, reason);
        assert.equal(client.cookies.get('sia_admin_session'), undefined, 'no session for a refused user');
      }
    });

    test('a demotion takes effect at the next request: refusal page, session ended', async () => {
      const user = await seedUser(ctx.db, accountId);
      const client = new AdminClient(ctx.app);
      await client.signIn(user.email);
      assert.equal((await client.get(INTEGRATIONS)).statusCode, 200);

      await ctx.db.updateTable('users').set({ role: 'manager' }).where('id', '=', user.id).execute();
      const refused = await client.get(INTEGRATIONS);
      assert.equal(refused.statusCode, 403);
      assert.match(refused.body, /your role is Manager/);
      const sessions = await ctx.db
        .selectFrom('admin_sessions')
        .select('id_hash')
        .where('user_id', '=', user.id)
        .execute();
      assert.equal(sessions.length, 0);
    });

    test('panel pages carry the security headers', async () => {
      const res = await new AdminClient(ctx.app).get('/admin/sign-in');
      const csp = res.headers['content-security-policy'] as string;
      assert.match(csp, /script-src 'self'/);
      assert.doesNotMatch(csp, /unsafe-inline/);
      assert.match(csp, /frame-ancestors 'none'/);
      assert.equal(res.headers['x-frame-options'], 'DENY');
      assert.equal(res.headers['referrer-policy'], 'same-origin');
      assert.equal(res.headers['cache-control'], 'no-store');
      assert.match(res.body, /<script src="\/admin\/assets\/admin\.js" defer><\/script>/);
      assert.doesNotMatch(res.body, /<script>|style="/);

      const script = await new AdminClient(ctx.app).get('/admin/assets/admin.js');
      assert.equal(script.statusCode, 200);
      assert.match(script.headers['content-type'] as string, /^text\/javascript/);
      assert.equal((await new AdminClient(ctx.app).get('/admin/assets/..%2Faccess.ts')).statusCode, 404);
    });
  });

  describe(`admin sign-in over HTTPS (${store})`, () => {
    let ctx: TestContext;
    before(async () => {
      ctx = await createTestContext(store, { BASE_URL: 'https://safety.example.test' });
    });
    after(() => ctx.close());

    test('the session cookie is Secure when the service is served over HTTPS', async () => {
      const accountId = await seedAccount(ctx.db);
      const user = await seedUser(ctx.db, accountId);
      const client = new AdminClient(ctx.app);
      const res = await client.signIn(user.email);
      assert.equal(res.statusCode, 303);
      assert.match(setCookie(res, 'sia_admin_session'), /; Secure/);
    });
  });
}
