import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { type Browser, type BrowserContext, type Page, type Response } from 'playwright-core';
import { CHROMIUM, launchChromium, axeViolations } from './chromium.ts';
import { apiKeyRepository } from '../../src/db/repositories/api-keys.ts';
import { createTestContext, seedAccount, seedKey, type TestContext } from '../helpers.ts';
import { PASSWORD, type SeededUser, seedUser } from '../routes/admin/admin-helpers.ts';

// The admin panel driven through real headless Chromium. It runs on SQLite only: the panel's
// database work is the same code on both stores and the inject tests cover it on each, while a
// browser run per store would double the slowest suite for no new coverage.

/**
 * Runs axe-core on the page as it is and fails on any violation, whatever its impact. The script is
 * evaluated through the DevTools protocol, which the page's CSP does not govern.
 */
async function assertAccessible(page: Page, what: string): Promise<void> {
  const violations = await axeViolations(page);
  assert.deepEqual(violations, [], `${what}: axe found violations`);
}

describe('admin panel in Chromium (sqlite)', () => {
  let ctx: TestContext;
  let browser: Browser;
  let base: string;
  let admin: SeededUser;
  let manager: SeededUser;
  let accountId: string;
  let rawKey = '';

  before(async () => {
    assert.ok(
      existsSync(CHROMIUM),
      `${CHROMIUM} is missing: install Debian's chromium package (.ci/run does)`,
    );
    ctx = await createTestContext('sqlite');
    accountId = await seedAccount(ctx.db, { name: 'Northwind' });
    admin = await seedUser(ctx.db, accountId, { name: 'Avery Admin' });
    manager = await seedUser(ctx.db, accountId, { role: 'manager' });
    await ctx.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`;
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await ctx?.close();
  });

  const publicApi = (key: string) =>
    fetch(`${base}/api/v1/public/incidents`, { headers: { authorization: `Bearer ${key}` } });

  /** Submits the sign-in form on `page` and waits for the page it leads to. */
  async function submitSignIn(page: Page, password: string): Promise<Response> {
    await page.getByLabel('Password').fill(password);
    const [response] = await Promise.all([
      page.waitForResponse((res) => res.request().method() === 'POST'),
      page.getByRole('button', { name: 'Sign in' }).click(),
    ]);
    await page.waitForLoadState();
    return response;
  }

  async function signIn(context: BrowserContext, email: string, password = PASSWORD): Promise<Page> {
    const page = await context.newPage();
    await page.goto(`${base}/admin`);
    await page.getByLabel('Email').fill(email);
    await submitSignIn(page, password);
    return page;
  }

  describe('a Super Admin on a phone-sized screen', () => {
    let context: BrowserContext;
    let page: Page;

    before(async () => {
      context = await browser.newContext({ viewport: { width: 390, height: 844 }, hasTouch: true });
      await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
      page = await signIn(context, admin.email);
    });
    after(() => context.close());

    test('signs in and lands on Settings > Integrations, which fits the screen', async () => {
      await page.getByRole('heading', { level: 1, name: 'Integrations' }).waitFor();
      assert.equal(new URL(page.url()).pathname, '/admin/settings/integrations');
      assert.ok(await page.getByRole('heading', { name: 'API keys' }).isVisible());
      assert.ok(await page.getByRole('heading', { name: 'OAuth clients' }).isVisible());
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 0, `page is ${overflow}px wider than the screen`);
    });

    test('the first Tab reaches the skip link (keyboard use)', async () => {
      await page.keyboard.press('Tab');
      assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Skip to content');
    });

    test('creates a key and reads it exactly once, with a working copy button', async () => {
      // Exact: the OAuth client form on the same page has a "Client name" field.
      await page.getByLabel('Name', { exact: true }).fill('Browser integration');
      await page.getByRole('button', { name: 'Create key' }).click();
      await page.getByText('Copy this key now. It will not be shown again').waitFor();
      rawKey = await page.getByLabel('New API key').inputValue();
      assert.match(rawKey, /^svc_[0-9a-f]{40}$/);

      await page.getByRole('button', { name: 'Copy' }).click();
      await page.getByText('Copied to the clipboard.').waitFor();
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), rawKey);

      await page.reload();
      assert.equal(await page.getByLabel('New API key').count(), 0);
      assert.ok(!(await page.content()).includes(rawKey), 'the raw key is gone after a reload');
      const row = page.locator('#api-keys-table tbody tr', { hasText: 'Browser integration' });
      assert.match((await row.textContent()) ?? '', /read[\s\S]*Active[\s\S]*Never[\s\S]*Avery Admin/);
    });

    test('the key works against the public API', async () => {
      assert.equal((await publicApi(rawKey)).status, 200);
    });

    test('disable refuses the key at its next request; enable restores it', async () => {
      await page.getByRole('link', { name: 'Browser integration' }).click();
      await page.getByRole('button', { name: 'Disable key' }).click();
      await page.getByText('Key “Browser integration” disabled').waitFor();
      const refused = await publicApi(rawKey);
      assert.equal(refused.status, 401);
      assert.equal(((await refused.json()) as { error: string }).error, 'API_KEY_INVALID');

      await page.getByRole('button', { name: 'Enable key' }).click();
      await page.getByText('Key “Browser integration” enabled.').waitFor();
      assert.equal((await publicApi(rawKey)).status, 200);
    });

    test('changes the scope', async () => {
      await page.getByLabel('Scope').selectOption('read-write');
      await page.getByRole('button', { name: 'Change scope' }).click();
      await page.getByText('Scope of “Browser integration” changed to read-write.').waitFor();
      assert.equal(await page.locator('.details dd').nth(1).textContent(), 'read-write');
      assert.equal((await publicApi(rawKey)).status, 200);
    });

    test('revokes after a confirmation; the key is refused for good', async () => {
      await page.getByRole('link', { name: 'Revoke key…' }).click();
      await page.getByText('Revoking is permanent.').waitFor();
      await page.getByRole('button', { name: 'Revoke permanently' }).click();
      await page.getByText('Key “Browser integration” revoked permanently.').waitFor();
      assert.equal((await publicApi(rawKey)).status, 401);
      assert.equal(await page.getByRole('button', { name: 'Enable key' }).count(), 0);
    });

    test('the audit trail shows every event, newest first', async () => {
      await page.getByRole('link', { name: '← All API keys' }).click();
      const rows = await page.locator('#audit-trail-table tbody tr').allTextContents();
      const actions = rows.map((row) => {
        assert.match(row, /Avery Admin/);
        assert.match(row, /Browser integration/);
        return (/Created|Disabled|Enabled|Changed scope|Revoked/.exec(row) ?? [''])[0];
      });
      assert.deepEqual(actions, ['Revoked', 'Changed scope', 'Enabled', 'Disabled', 'Created']);
    });

    test('a forged cross-site form post is refused with 403 and changes nothing', async () => {
      const target = await seedKey(ctx.db, accountId, { name: 'Target' });
      const attacker: Server = createServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end(
          `<form method="post" action="${base}/admin/settings/integrations/api-keys/${target.id}/revoke">` +
            '<button type="submit">Win a prize</button></form>',
        );
      });
      await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
      try {
        // localhost and 127.0.0.1 are different sites, as an attacker's domain would be.
        const evil = await context.newPage();
        await evil.goto(`http://localhost:${(attacker.address() as AddressInfo).port}/`);
        const [response] = await Promise.all([
          evil.waitForResponse((res) => res.url().endsWith(`/${target.id}/revoke`)),
          evil.getByRole('button', { name: 'Win a prize' }).click(),
        ]);
        assert.equal(response.status(), 403);
        await evil.getByRole('heading', { name: 'Invalid or missing CSRF token' }).waitFor();
        await evil.close();
      } finally {
        await new Promise((resolve) => attacker.close(resolve));
      }

      // Even from the panel's own origin, with the session cookie, a form lacking the token fails.
      const [sameSite] = await Promise.all([
        page.waitForResponse((res) => res.url().endsWith(`/${target.id}/revoke`)),
        page.evaluate((action) => {
          const form = document.createElement('form');
          form.method = 'post';
          form.action = action;
          document.body.append(form);
          form.submit();
        }, `${base}/admin/settings/integrations/api-keys/${target.id}/revoke`),
      ]);
      assert.equal(sameSite.status(), 403);
      // Let that navigation finish, so the next step does not race it.
      await page.getByRole('heading', { name: 'Invalid or missing CSRF token' }).waitFor();

      assert.equal((await apiKeyRepository.findById(ctx.db, target.id))?.state, 'active');
      assert.equal((await publicApi(target.rawKey)).status, 200);
    });

    test('registers an OAuth client, reads its secret exactly once, then deletes the client', async () => {
      await page.goto(`${base}/admin/settings/integrations`);
      await page.getByLabel('Client name').fill('Browser partner');
      await page.getByLabel('Redirect URIs').fill('https://partner.example/cb\nhttp://localhost:5173/cb');
      await page.getByRole('button', { name: 'Register client' }).click();
      await page.getByText('Copy this client secret now. It will not be shown again').waitFor();
      const clientId = await page.getByLabel('Client ID').inputValue();
      const secret = await page.getByLabel('Client secret').inputValue();
      assert.match(clientId, /^oc_[0-9a-f]{32}$/);
      assert.match(secret, /^ocs_[0-9a-f]{64}$/);

      await page.reload();
      assert.equal(await page.getByLabel('Client secret').count(), 0);
      assert.ok(!(await page.content()).includes(secret), 'the secret is gone after a reload');
      const row = page.locator('#oauth-clients-table tbody tr', { hasText: 'Browser partner' });
      assert.match((await row.textContent()) ?? '', new RegExp(`${clientId}[\\s\\S]*Confidential`));
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 0, `page is ${overflow}px wider than the screen`);

      await page.getByRole('link', { name: 'Delete Browser partner' }).click();
      await page.getByText('Deleting is permanent.').waitFor();
      await page.getByRole('button', { name: 'Delete permanently' }).click();
      await page.getByText('OAuth client “Browser partner” deleted').waitFor();
      assert.equal(await row.count(), 0);
    });

    test('signs out', async () => {
      await page.goto(`${base}/admin/settings/integrations`);
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByText('You are signed out.').waitFor();
      await page.goto(`${base}/admin/settings/integrations`);
      assert.equal(new URL(page.url()).pathname, '/admin/sign-in');
    });
  });

  describe('a Super Admin finding a key among many, reading its usage and rolling it', () => {
    let context: BrowserContext;
    let page: Page;
    let powerBi: { id: string; rawKey: string };

    before(async () => {
      const account = await seedAccount(ctx.db, { name: 'Contoso' });
      const owner = await seedUser(ctx.db, account, { name: 'Sam Super' });
      for (let i = 0; i < 55; i += 1) await seedKey(ctx.db, account, { name: `Sensor ${i}` });
      powerBi = await seedKey(ctx.db, account, { name: 'PowerBI export' });
      const paused = await seedKey(ctx.db, account, { name: 'PowerBI paused' });
      await ctx.db.updateTable('api_keys').set({ state: 'disabled' }).where('id', '=', paused.id).execute();
      context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      page = await signIn(context, owner.email);
      await page.getByRole('heading', { level: 1, name: 'Integrations' }).waitFor();
    });
    after(() => context.close());

    const listedNames = () =>
      page.locator('#api-keys-table tbody tr td[data-label="Name"]').allTextContents();

    test('pages of 50 with a link to the next page; the list is accessible', async () => {
      assert.equal((await listedNames()).length, 50);
      await page.getByText('Keys 1–50 of 57 · page 1 of 2').waitFor();
      await assertAccessible(page, 'keys list');
      await page.getByRole('link', { name: 'Next page' }).click();
      await page.getByText('Keys 51–57 of 57 · page 2 of 2').waitFor();
      assert.equal((await listedNames()).length, 7);
    });

    test('search by name and filter by state, without a script', async () => {
      await page.getByLabel('Name or prefix').fill('powerbi');
      await page.getByLabel('State', { exact: true }).selectOption('active');
      await page.getByRole('button', { name: 'Find keys' }).click();
      await page.getByText('Keys 1–1 of 1 · page 1 of 1').waitFor();
      assert.deepEqual(await listedNames(), ['PowerBI export']);
      const url = new URL(page.url());
      assert.equal(url.searchParams.get('q'), 'powerbi');
      assert.equal(url.searchParams.get('state'), 'active');
      assert.equal(await page.getByLabel('Name or prefix').inputValue(), 'powerbi');

      await page.getByLabel('State', { exact: true }).selectOption('disabled');
      await page.getByRole('button', { name: 'Find keys' }).click();
      await page.getByText('Keys 1–1 of 1 · page 1 of 1').waitFor();
      assert.deepEqual(await listedNames(), ['PowerBI paused']);

      await page.getByLabel('Name or prefix').fill(powerBi.rawKey.slice(0, 12));
      await page.getByLabel('State', { exact: true }).selectOption('');
      await page.getByRole('button', { name: 'Find keys' }).click();
      await page.getByText('Keys 1–1 of 1 · page 1 of 1').waitFor();
      assert.deepEqual(await listedNames(), ['PowerBI export']);
      await assertAccessible(page, 'keys list, filtered');
    });

    test('the key page shows its usage as a chart, totals and a table; accessible', async () => {
      for (let i = 0; i < 3; i += 1) assert.equal((await publicApi(powerBi.rawKey)).status, 200);
      const missing = await fetch(`${base}/api/v1/public/incidents/none`, {
        headers: { authorization: `Bearer ${powerBi.rawKey}` },
      });
      assert.equal(missing.status, 404);
      await ctx.runtime.keyUsage.flush();

      await page.getByRole('link', { name: 'PowerBI export' }).click();
      await page.getByRole('heading', { name: 'Usage' }).waitFor();
      assert.ok(await page.getByRole('img', { name: 'Requests per hour, last 30 days' }).isVisible());
      const day = page.locator('#usage-totals-table tbody tr').first();
      assert.deepEqual(await day.locator('th, td').allTextContents(), ['Last 24 hours', '3', '1', '0']);
      await page.getByText('Requests per hour as a table').click();
      assert.ok(await page.locator('#usage-hours-table').isVisible());
      assert.equal(await page.locator('#usage-hours-table tbody tr').count(), 1);
      await assertAccessible(page, 'key page with usage');
    });

    test('rolls the key: the new value shown once, both keys work, the pages link to each other', async () => {
      await page.getByLabel('In 7 days').check();
      await page.getByRole('button', { name: 'Roll key' }).click();
      await page.getByText('Copy this key now. It will not be shown again').waitFor();
      const successor = await page.getByLabel('New API key').inputValue();
      assert.match(successor, /^svc_[0-9a-f]{40}$/);
      assert.equal((await publicApi(successor)).status, 200);
      assert.equal((await publicApi(powerBi.rawKey)).status, 200);
      await assertAccessible(page, 'rolled key page');

      await page.getByRole('link', { name: 'PowerBI export' }).click();
      await page.getByRole('link', { name: /^PowerBI export \(rolled / }).waitFor();
      const expires = await page.locator('dt:text-is("Expires") + dd time').getAttribute('datetime');
      assert.ok(Math.abs(Date.parse(expires ?? '') - (Date.now() + 7 * 24 * 3600_000)) < 60_000);
    });
  });

  test('a manager gets a refusal page, not the keys', async () => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${base}/admin/sign-in`);
      await page.getByLabel('Email').fill(manager.email);
      assert.equal((await submitSignIn(page, PASSWORD)).status(), 403);
      await page.getByRole('heading', { name: 'Access refused' }).waitFor();
      assert.match((await page.locator('main').textContent()) ?? '', /your role is Manager/);
      assert.equal(await page.locator('#api-keys-table').count(), 0);
    } finally {
      await context.close();
    }
  });

  test('repeated failed sign-ins are throttled with a clear message', async () => {
    const target = await seedUser(ctx.db, accountId);
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${base}/admin/sign-in`);
      await page.getByLabel('Email').fill(target.email);
      for (let attempt = 1; attempt <= 5; attempt++) {
        assert.equal((await submitSignIn(page, `wrong password ${attempt}`)).status(), 401);
        await page.getByText('The email or password is incorrect.').waitFor();
      }
      assert.equal((await submitSignIn(page, PASSWORD)).status(), 429);
      await page
        .getByText(/Too many failed sign-in attempts\. Wait 15 minutes before trying again\./)
        .waitFor();
    } finally {
      await context.close();
    }
  });
});
