import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { type Browser, type BrowserContext, type Page } from 'playwright-core';
import { CHROMIUM, launchChromium, axeViolations } from './chromium.ts';
import { GUIDES } from '../../src/openapi/guides.ts';
import { createTestContext, type TestContext } from '../helpers.ts';
import { until } from '../wait.ts';

// The reference page `/docs` (Scalar's API reference, served by the service) in real headless
// Chromium, cut off from every other host: it must load and work from the service alone, without
// an error and without an accessibility violation. It reads only the document, so SQLite is enough.

interface Operation {
  operationId?: string;
  summary?: string;
}

interface OpenApi {
  paths: Record<string, Record<string, Operation>>;
  webhooks: Record<string, { post: Operation }>;
  components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
}

describe('/docs in Chromium (sqlite)', () => {
  let ctx: TestContext;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let base: string;
  let document: OpenApi;
  const elsewhere: string[] = [];
  const consoleErrors: string[] = [];
  const pageErrors: string[] = [];

  /** The summary of the operation `operationId`, as the document gives it. */
  function summaryOf(operationId: string): string {
    const operation = Object.values(document.paths)
      .flatMap((item) => Object.values(item))
      .find((candidate) => candidate.operationId === operationId);
    assert.ok(operation?.summary, `${operationId} has a summary`);
    return operation.summary;
  }

  before(async () => {
    assert.ok(
      existsSync(CHROMIUM),
      `${CHROMIUM} is missing: install Debian's chromium package (.ci/run does)`,
    );
    ctx = await createTestContext('sqlite');
    await ctx.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`;
    document = (await ctx.app.inject({ url: '/openapi.json' })).json();
    browser = await launchChromium();
    context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    // Offline but for the service: whatever asks for another host is refused, and noted.
    await context.route('**/*', async (route) => {
      const url = route.request().url();
      if (new URL(url).origin === base) return route.continue();
      elsewhere.push(url);
      return route.abort();
    });
    page = await context.newPage();
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text());
    });
    page.on('pageerror', (error) => pageErrors.push(error.message));
    await page.goto(`${base}/docs`);
  });
  after(async () => {
    await context?.close();
    await browser?.close();
    await ctx?.close();
  });

  const sidebar = () => page.getByRole('complementary');

  function assertNothingFailed(): void {
    assert.deepEqual(elsewhere, [], 'requests to another host');
    assert.deepEqual(consoleErrors, [], 'console errors (CSP violations included)');
    assert.deepEqual(pageErrors, [], 'uncaught errors');
  }

  /**
   * Runs axe-core on the page as it is and fails on serious or critical violations. The script is
   * evaluated through the DevTools protocol, which the page's CSP does not govern.
   */
  async function assertAccessible(what: string): Promise<void> {
    const violations = await axeViolations(page);
    const severe = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
    assert.deepEqual(severe, [], `${what}: axe found serious or critical violations`);
  }

  test('renders the reference from the service alone, without an error', async () => {
    await sidebar()
      .getByRole('link', { name: summaryOf('listIncidents') })
      .waitFor();
    assert.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'Safety Incident API');
    // The document itself, fetched from the page's own origin.
    assert.ok(await page.getByRole('link', { name: 'Download OpenAPI Document' }).isVisible());
    assertNothingFailed();
  });

  test('axe-core finds no serious or critical violation', async () => {
    await assertAccessible('/docs');
  });

  test('the sidebar lists the operations, every webhook event and the schemas, all open', async () => {
    for (const operationId of ['listIncidents', 'getIncident', 'exportIncidents', 'listChanges']) {
      assert.ok(
        await sidebar()
          .getByRole('link', { name: summaryOf(operationId) })
          .isVisible(),
        operationId,
      );
    }
    const events = Object.values(document.webhooks).map(({ post }) => post.summary ?? '');
    assert.ok(events.length >= 13, 'the document has the webhook events');
    for (const summary of events) {
      assert.ok(
        await sidebar()
          .getByRole('link', { name: `${summary} HTTP Method: POST` })
          .isVisible(),
        summary,
      );
    }
    assert.ok(await sidebar().getByRole('link', { name: 'Incident', exact: true }).isVisible());
  });

  test('search opens and finds an operation', async () => {
    const summary = summaryOf('getIncident');
    await sidebar()
      .getByRole('button', { name: /^Open Search/ })
      .click();
    const dialog = page.getByRole('dialog', { name: 'Search' });
    await dialog.getByRole('combobox').fill(summary);
    const result = dialog.getByRole('option', { name: `Operation: ${summary}` });
    await result.waitFor();
    await result.click();
    await dialog.waitFor({ state: 'hidden' });
    await page.getByRole('heading', { level: 3, name: summary }).waitFor();
  });

  test('an operation shows its request in curl first, and offers the TypeScript SDK and fetch, no other client', async () => {
    await sidebar()
      .getByRole('link', { name: summaryOf('listIncidents') })
      .click();
    const example = page.getByRole('group', {
      name: 'Request Example for get/api/v1/public/incidents',
      exact: true,
    });
    const code = example.getByRole('code');
    await example.waitFor();
    assert.match((await code.textContent()) ?? '', /^curl -s "http:\/\/[^"]*\/api\/v1\/public\/incidents/);

    await example.getByRole('button', { name: 'curl' }).click();
    const clients = page.getByRole('listbox');
    assert.deepEqual(await clients.getByRole('option').allTextContents(), [
      'curl',
      'TypeScript SDK',
      'Fetch',
    ]);
    await clients.getByRole('option', { name: 'TypeScript SDK' }).click();
    await example.getByRole('button', { name: 'TypeScript SDK' }).waitFor();
    assert.match(
      (await code.textContent()) ?? '',
      /from '@safety-incident\/sdk';[\s\S]*client\.listIncidents\(/,
    );

    await example.getByRole('button', { name: 'TypeScript SDK' }).click();
    await clients.getByRole('option', { name: 'Fetch' }).click();
    await example.getByRole('button', { name: 'JavaScript Fetch' }).waitFor();
    assert.match((await code.textContent()) ?? '', /fetch\('.*\/api\/v1\/public\/incidents/);
  });

  test("the Client Libraries box picks the samples' language on every operation", async () => {
    const libraries = page.getByRole('tablist', { name: 'Client Libraries' });
    await libraries.scrollIntoViewIfNeeded();
    await libraries.getByRole('tab', { name: 'TypeScript' }).click();
    await sidebar()
      .getByRole('link', { name: summaryOf('getIncident') })
      .click();
    const example = page.getByRole('group', {
      name: 'Request Example for get/api/v1/public/incidents/{id}',
      exact: true,
    });
    await example.getByRole('button', { name: 'TypeScript SDK' }).waitFor();
    assert.match((await example.getByRole('code').textContent()) ?? '', /client\.getIncident\(/);
    // Back to curl, which the tests after this one expect.
    await libraries.scrollIntoViewIfNeeded();
    await libraries.getByRole('tab', { name: 'curl' }).click();
    await example.getByRole('button', { name: 'curl' }).waitFor();
  });

  test('every guide is in the sidebar, and Scalar’s search finds it and goes there', async () => {
    for (const title of GUIDES) {
      // Scalar's address of a heading of the description: its slug.
      const link = sidebar().locator(`a[href="#description/${title.toLowerCase().replaceAll(' ', '-')}"]`);
      assert.equal(await link.textContent(), title);
      assert.ok(await link.isVisible(), title);
      await sidebar()
        .getByRole('button', { name: /^Open Search/ })
        .click();
      const dialog = page.getByRole('dialog', { name: 'Search' });
      await dialog.getByRole('combobox').fill(title);
      const result = dialog.getByRole('option', { name: `Heading: ${title}` });
      await result.waitFor();
      assert.match(
        (await dialog.getByRole('option').first().textContent()) ?? '',
        new RegExp(`Heading:\\s+${title}`),
      );
      await result.click();
      await dialog.waitFor({ state: 'hidden' });
      const heading = page.getByRole('heading', { name: title, exact: true });
      await until(
        async () =>
          heading.evaluate((element) => {
            const { top } = element.getBoundingClientRect();
            return top >= 0 && top < window.innerHeight;
          }),
        10_000,
        `the heading "${title}" in view`,
      );
    }
  });

  test('a schema is rendered with its properties', async () => {
    await sidebar().getByRole('link', { name: 'Incident', exact: true }).click();
    const schema = page.getByRole('region', { name: 'Incident', exact: true });
    await schema.getByRole('listitem').first().waitFor();
    const text = (await schema.getByRole('listitem').allTextContents()).join('\n');
    const properties = Object.keys(document.components.schemas.Incident?.properties ?? {});
    assert.ok(properties.length > 5, 'the document has the schema');
    for (const property of properties) {
      assert.ok(text.includes(property), property);
    }
  });

  test('after all of the above: still nothing from elsewhere, no error, accessible', async () => {
    assertNothingFailed();
    await assertAccessible('/docs, further down');
  });

  test('accessible in dark mode too', async () => {
    await sidebar().getByRole('button', { name: 'Set dark mode' }).click();
    await page.locator('body.dark-mode').waitFor({ state: 'attached' });
    await assertAccessible('/docs in dark mode');
    assertNothingFailed();
  });
});
