import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { type Browser, type BrowserContext, type Page } from 'playwright-core';
import { CHROMIUM, launchChromium, axeViolations, type Violation } from './chromium.ts';
import { kyselyAdapter } from '../../src/oauth/adapter.ts';
import { ADMIN_PATH } from '../../src/paths.ts';
import { oauthClientService } from '../../src/services/oauth-client-service.ts';
import { buildServices } from '../../src/services/services.ts';
import { OutboundClient } from '../../src/webhooks/outbound.ts';
import { webhookRepository } from '../../src/db/repositories/webhooks.ts';
import { createTestContext, seedAccount, seedIncidents, seedKey, type TestContext } from '../helpers.ts';
import { PASSWORD, type SeededUser, seedUser } from '../routes/admin/admin-helpers.ts';

// Every page of the admin panel, found from its routes, checked by axe-core in real headless
// Chromium: no violation of any impact, on a desktop and on a phone-sized screen. SQLite only, as
// the other browser suites: the pages are the same on both stores.

// GET routes that are not pages: files, a download, and redirects to a page.
const NOT_PAGES = new Set([
  `${ADMIN_PATH}`,
  `${ADMIN_PATH}/`,
  `${ADMIN_PATH}/assets/:file`,
  `${ADMIN_PATH}/settings/integrations/audit.csv`,
]);

/**
 * The admin panel's GET routes, read from Fastify's route tree (each line is one segment, indented
 * four characters a level under its parent). Nodes the tree prints that are not routes themselves
 * are dropped by asking the router.
 */
function adminGetRoutes(ctx: TestContext): string[] {
  const tree = ctx.app.printRoutes({ commonPrefix: false, method: 'GET' });
  const stack: string[] = [];
  const routes: string[] = [];
  for (const line of tree.split('\n')) {
    const match = /^([│ ]*)(?:├── |└── )?(\S+) \(/.exec(line);
    if (match === null) continue;
    const depth = Math.floor((match[1] as string).length / 4);
    stack.length = depth;
    stack.push(match[2] as string);
    const path = stack.join('');
    if (path.startsWith(ADMIN_PATH) && ctx.app.hasRoute({ method: 'GET', url: path })) routes.push(path);
  }
  return routes;
}

describe('every admin page is accessible in Chromium (sqlite)', () => {
  let ctx: TestContext;
  let browser: Browser;
  let base: string;
  let admin: SeededUser;
  let accountId: string;
  const ids = { key: '', client: '', endpoint: '', attempt: '' };

  before(async () => {
    assert.ok(
      existsSync(CHROMIUM),
      `${CHROMIUM} is missing: install Debian's chromium package (.ci/run does)`,
    );
    ctx = await createTestContext('sqlite', { WEBHOOKS_ALLOW_PRIVATE: 'true' });
    accountId = await seedAccount(ctx.db, { name: 'Northwind' });
    admin = await seedUser(ctx.db, accountId, { name: 'Avery Admin' });
    const grantee = await seedUser(ctx.db, accountId, { name: 'Gina Grantee', role: 'employee' });
    ids.key = (await seedKey(ctx.db, accountId, { name: 'PowerBI' })).id;
    const { client } = await oauthClientService.create(ctx.db, {
      accountId,
      name: 'Acme BI',
      redirectUris: ['https://bi.acme.example/cb'],
      isPublic: false,
    });
    ids.client = client.client_id;
    // A grant, so that the client page shows its table of grants.
    await kyselyAdapter(ctx.db)('Grant').upsert(
      'grant-a11y',
      {
        kind: 'Grant',
        jti: 'grant-a11y',
        accountId: grantee.id,
        clientId: client.client_id,
        openid: { scope: 'openid email' },
        iat: Math.floor(Date.now() / 1000),
      },
      3600,
    );
    const outbound = new OutboundClient({ allowPrivate: true, timeoutMs: 2000 });
    const { endpoint } = await buildServices(ctx.runtime.database, ctx.config, outbound).webhooks.create({
      accountId,
      url: 'http://127.0.0.1:9/hook',
      description: 'Warehouse sync',
      actor: admin.id,
    });
    ids.endpoint = endpoint.id;
    await ctx.runtime.services.webhooks.disable(endpoint.id, admin.id, {
      accountId,
      reason: 'paused for the test',
    });
    // A delivery log with an attempt to open, failing on an event it is stuck on (the skip form).
    await webhookRepository.recordAttempts(ctx.db, [
      {
        endpoint_id: endpoint.id,
        webhook_id: 'msg_accessible',
        type: 'incident.created',
        seq: 1,
        at: new Date().toISOString(),
        status: 500,
        duration_ms: 40,
        error: 'HTTP 500: {"error":"broken"}',
        request_headers: JSON.stringify({ 'webhook-id': 'msg_accessible', 'webhook-signature': 'v1,abc=' }),
        request_body: JSON.stringify({
          type: 'incident.created',
          data: { id: 'x', object: { a: 'b'.repeat(300) } },
        }),
        response_headers: JSON.stringify({
          'content-type': 'application/json',
          'set-cookie': ['a=1', 'b=2'],
        }),
        response_body: '{"error":"broken"}',
        outcome: 'http_error',
      },
    ]);
    ids.attempt = String((await webhookRepository.listAttempts(ctx.db, endpoint.id, 1))[0]?.id);
    await seedIncidents(ctx.db, accountId, 1);
    await webhookRepository.update(ctx.db, endpoint.id, {
      failing_since: new Date().toISOString(),
      updated_at: new Date().toISOString(),
    });
    await oauthClientService.rotateSecret(ctx.db, client.client_id, '1h', admin.id);

    await ctx.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`;
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await ctx?.close();
  });

  /** A concrete URL for a route: its `:id` is the seeded key, client or endpoint of its section. */
  function urlOf(route: string): string {
    if (!route.includes(':id')) return route;
    const section = /\/(api-keys|oauth-clients|webhooks)\/:id/.exec(route)?.[1];
    const id = { 'api-keys': ids.key, 'oauth-clients': ids.client, webhooks: ids.endpoint }[section ?? ''];
    assert.ok(id !== undefined, `no seeded record for ${route}: add one to this test`);
    return route.replace(':id', encodeURIComponent(id)).replace(':attemptId', ids.attempt);
  }

  async function violationsOf(page: Page): Promise<Violation[]> {
    // Through the DevTools protocol, which the page's CSP does not govern.
    return axeViolations(page);
  }

  async function signIn(page: Page): Promise<void> {
    await page.goto(`${base}${ADMIN_PATH}/sign-in`);
    await page.getByLabel('Email').fill(admin.email);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Integrations' }).waitFor();
  }

  const viewports = [
    { name: 'desktop', viewport: { width: 1280, height: 900 }, hasTouch: false },
    { name: 'phone', viewport: { width: 390, height: 844 }, hasTouch: true },
  ];

  for (const { name, ...options } of viewports) {
    test(`${name}: every admin page, signed out and in, has no axe violation of any impact`, async () => {
      const context: BrowserContext = await browser.newContext(options);
      try {
        const page = await context.newPage();
        const found: Record<string, Violation[]> = {};
        const check = async (what: string, url: string) => {
          const response = await page.goto(`${base}${url}`);
          assert.ok(response !== null && response.status() < 500, `${what}: ${response?.status()}`);
          const violations = await violationsOf(page);
          if (violations.length > 0) found[what] = violations;
        };

        await check('sign-in page', `${ADMIN_PATH}/sign-in`);
        await signIn(page);
        const routes = adminGetRoutes(ctx).filter((route) => !NOT_PAGES.has(route));
        assert.ok(routes.length >= 10, `the routes were read: ${routes.join(' ')}`);
        for (const route of routes) await check(route, urlOf(route));

        // Pages in states the routes alone do not show.
        await check(
          'audit trail, filtered',
          `${ADMIN_PATH}/settings/integrations/audit?subject_type=oauth_client`,
        );
        await check('audit trail, refused filter', `${ADMIN_PATH}/settings/integrations/audit?from=nope`);
        const endpointPage = urlOf(`${ADMIN_PATH}/settings/integrations/webhooks/:id`);
        await check('delivery log, filtered', `${endpointPage}?outcome=failure&type=incident.*`);
        await check('delivery log, nothing matches', `${endpointPage}?outcome=success`);
        await check('delivery log, refused filter', `${endpointPage}?outcome=nope`);
        await check('not found', `${ADMIN_PATH}/settings/integrations/oauth-clients/oc_missing`);
        await page.goto(`${base}${urlOf(`${ADMIN_PATH}/settings/integrations/oauth-clients/:id`)}`);
        await page.getByRole('button', { name: 'Rotate secret' }).click();
        await page.getByText('Copy this client secret now').waitFor();
        const flash = await violationsOf(page);
        if (flash.length > 0) found['client page with a new secret'] = flash;

        assert.deepEqual(found, {}, 'axe found violations');
      } finally {
        await context.close();
      }
    });
  }
});
