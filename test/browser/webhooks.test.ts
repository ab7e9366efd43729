import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { type Browser, type BrowserContext, type Page } from 'playwright-core';
import { CHROMIUM, launchChromium, axeViolations } from './chromium.ts';
import { webhookRepository } from '../../src/db/repositories/webhooks.ts';
import { createTestContext, seedAccount, type TestContext } from '../helpers.ts';
import { PASSWORD, type SeededUser, seedUser } from '../routes/admin/admin-helpers.ts';
import { Receiver } from '../webhooks/receiver.ts';

// The webhook pages of the admin panel in real headless Chromium, checked with axe-core for
// accessibility and watched for Content Security Policy violations. SQLite only, like
// admin.test.ts: the inject tests cover both stores.

describe('admin webhook pages in Chromium (sqlite)', () => {
  let ctx: TestContext;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let base: string;
  let admin: SeededUser;
  let accountId: string;
  let receiver: Receiver;
  let endpointId = '';
  let secret = '';
  const cspViolations: string[] = [];

  before(async () => {
    assert.ok(
      existsSync(CHROMIUM),
      `${CHROMIUM} is missing: install Debian's chromium package (.ci/run does)`,
    );
    ctx = await createTestContext('sqlite', { WEBHOOKS_ALLOW_PRIVATE: 'true', WEBHOOK_TIMEOUT_MS: '2000' });
    accountId = await seedAccount(ctx.db, { name: 'Northwind' });
    admin = await seedUser(ctx.db, accountId, { name: 'Avery Admin' });
    receiver = await Receiver.start();
    await ctx.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`;
    browser = await launchChromium();
    // Phone-sized, where the tables turn into cards.
    context = await browser.newContext({ viewport: { width: 390, height: 844 }, hasTouch: true });
    page = await context.newPage();
    page.on('console', (message) => {
      if (/Content Security Policy/i.test(message.text())) cspViolations.push(message.text());
    });
    await page.goto(`${base}/admin`);
    await page.getByLabel('Email').fill(admin.email);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Integrations' }).waitFor();
  });
  after(async () => {
    await context?.close();
    await browser?.close();
    await receiver?.close();
    await ctx?.close();
  });

  /**
   * Runs axe-core on the page as it is and fails on serious or critical violations. The script is
   * evaluated through the DevTools protocol, which the page's CSP does not govern, so the page keeps
   * its real policy.
   */
  async function assertAccessible(what: string): Promise<void> {
    const violations = await axeViolations(page);
    const severe = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
    assert.deepEqual(severe, [], `${what}: axe found serious or critical violations`);
  }

  async function assertFits(what: string): Promise<void> {
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `${what} is ${overflow}px wider than the screen`);
  }

  test('Settings › Integrations links to Webhooks; the empty list is accessible', async () => {
    await assertAccessible('Integrations');
    await page
      .getByRole('navigation', { name: 'Integrations' })
      .getByRole('link', { name: 'Webhooks' })
      .click();
    await page.getByRole('heading', { level: 1, name: 'Webhooks' }).waitFor();
    assert.equal(new URL(page.url()).pathname, '/admin/settings/integrations/webhooks');
    await page.getByText('No webhook endpoints yet.').waitFor();
    await assertAccessible('the empty webhook list');
  });

  test('adds an endpoint and reads its secret exactly once', async () => {
    await page.getByLabel('URL').fill(receiver.url());
    await page.getByLabel('Events').fill('incident.*, user.*');
    await page.getByLabel('Description').fill('Warehouse sync');
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    await page.getByText('Copy this signing secret now. It will not be shown again').waitFor();
    secret = await page.getByLabel('Signing secret', { exact: true }).inputValue();
    assert.match(secret, /^whsec_/);
    endpointId = new URL(page.url()).pathname.split('/').at(-1) ?? '';
    await assertAccessible('the new endpoint with its secret');
    await assertFits('the new endpoint page');

    await page.reload();
    assert.equal(await page.getByLabel('Signing secret', { exact: true }).count(), 0);
    assert.ok(!(await page.content()).includes(secret), 'the secret is gone after a reload');
  });

  test('sends a test event: the receiver gets it and the page shows the result in the log', async () => {
    await page.getByRole('button', { name: 'Send test event' }).click();
    await page.getByText(/Test event msg_test_\S+ delivered: HTTP 204/).waitFor();
    await receiver.waitFor(1);
    assert.equal(receiver.received[0]?.json.type, 'webhook.test');
    const row = page.locator('#webhook-attempts-table tbody tr').first();
    assert.match((await row.textContent()) ?? '', /webhook\.test[\s\S]*HTTP 204/);
    await assertAccessible('the endpoint page with its delivery log and history');
    await assertFits('the endpoint page');
  });

  test("an attempt's page shows what was sent and what came back, fits a phone, is accessible, and redelivers the event", async () => {
    await page
      .locator('#webhook-attempts-table tbody tr')
      .first()
      .getByRole('link', { name: /^Details/ })
      .click();
    await page.getByRole('heading', { level: 1, name: /^Delivery attempt msg_test_/ }).waitFor();
    const sent = receiver.received[0];
    assert.ok(sent !== undefined);
    assert.match(
      (await page.locator('#attempt-request-headers').textContent()) ?? '',
      new RegExp(`webhook-signature${String(sent.headers['webhook-signature']).replaceAll('+', '\\+')}`),
    );
    assert.match(
      (await page.locator('#attempt-request-body').textContent()) ?? '',
      /"type": "webhook\.test"/,
    );
    assert.equal(await page.locator('#attempt-response-status').textContent(), 'HTTP 204');
    assert.ok(!(await page.content()).includes(secret.slice('whsec_'.length)), 'never the secret');
    await assertAccessible("an attempt's page");
    await assertFits("an attempt's page");

    await page.getByRole('button', { name: 'Redeliver this event' }).click();
    await page.getByText(/Event msg_test_\S+ redelivered: HTTP 204/).waitFor();
    await receiver.waitFor(2);
    assert.equal(receiver.received[1]?.headers['webhook-id'], sent.headers['webhook-id']);
    assert.equal(receiver.received[1]?.body, sent.body);
  });

  test('the list shows the endpoint, and is accessible', async () => {
    await page.getByRole('link', { name: '← All webhook endpoints' }).click();
    const row = page.locator('#webhooks-table tbody tr', { hasText: receiver.url() });
    assert.match(
      (await row.textContent()) ?? '',
      /Warehouse sync[\s\S]*incident\.\*[\s\S]*Active[\s\S]*0 changes/,
    );
    await assertAccessible('the webhook list');
    await assertFits('the webhook list');
  });

  test('a failed test event, a disabled endpoint past retention and its restart confirmation are accessible', async () => {
    receiver.answer = (_received, response) => {
      response.statusCode = 503;
      response.end('maintenance');
    };
    await page.getByRole('link', { name: receiver.url() }).click();
    await page.getByRole('button', { name: 'Send test event' }).click();
    await page.getByText(/failed after \d+ ms: HTTP 503: maintenance/).waitFor();
    await page.getByRole('button', { name: 'Disable endpoint' }).click();
    await page.getByText('Webhook endpoint disabled').waitFor();
    await assertAccessible('a disabled endpoint with a failed attempt');

    const position = (await webhookRepository.findById(ctx.db, endpointId))?.position ?? 0;
    await ctx.db
      .updateTable('accounts')
      .set({ changes_purged_seq: position + 5, data_version: position + 10 })
      .where('id', '=', accountId)
      .execute();
    await page.reload();
    await page.getByRole('heading', { name: "Past the feed's retention" }).waitFor();
    await assertAccessible('an endpoint past retention');

    await page.getByRole('link', { name: 'Enable and restart from latest…' }).click();
    await page.getByRole('heading', { level: 1, name: /from the latest change\?/ }).waitFor();
    await assertAccessible('the restart confirmation');
    await page.getByLabel('I understand that the changes made while it was stopped are not sent').check();
    await page.getByRole('button', { name: 'Enable and restart from latest' }).click();
    await page.getByText('Webhook endpoint enabled from the latest change').waitFor();
    assert.equal((await webhookRepository.findById(ctx.db, endpointId))?.position, position + 10);
  });

  test('rotates the secret, then deletes the endpoint after a confirmation', async () => {
    await page.getByLabel('Overlap in hours').fill('0');
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    await page.getByText('Signing secret rotated').waitFor();
    const rotated = await page.getByLabel('Signing secret', { exact: true }).inputValue();
    assert.notEqual(rotated, secret);
    await assertAccessible('the rotated secret');

    await page.getByRole('link', { name: 'Delete endpoint…' }).click();
    await page.getByText('Deleting is permanent.').waitFor();
    await assertAccessible('the delete confirmation');
    await page.getByRole('button', { name: 'Delete permanently' }).click();
    await page.getByText(/Webhook endpoint \S+ deleted/).waitFor();
    assert.equal(await webhookRepository.findById(ctx.db, endpointId), undefined);
  });

  test('on a desktop screen, where the tables are tables, the list and an endpoint are accessible too', async () => {
    const { endpoint } = await ctx.runtime.services.webhooks.create({
      accountId,
      url: receiver.url('/desktop-receiver-with-a-rather-long-path/that-goes-on/and-on'),
      events: 'incident.created,incident.updated,incident.deleted,user.*,department.*,location.*',
      actor: admin.id,
    });
    await ctx.runtime.services.webhooks.sendTest(endpoint.id);
    await page.setViewportSize({ width: 1280, height: 800 });
    try {
      await page.goto(`${base}/admin/settings/integrations/webhooks`);
      await assertAccessible('the webhook list on a desktop');
      await assertFits('the webhook list on a desktop');
      await page.goto(`${base}/admin/settings/integrations/webhooks/${endpoint.id}`);
      await assertAccessible('an endpoint on a desktop');
      await assertFits('an endpoint on a desktop');
    } finally {
      await page.setViewportSize({ width: 390, height: 844 });
    }
  });

  test('no page broke the Content Security Policy', () => {
    assert.deepEqual(cspViolations, []);
  });
});
