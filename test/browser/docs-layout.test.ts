import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchChromium } from './chromium.ts';
import { createTestContext, ROOT, type TestContext } from '../helpers.ts';
import { until } from '../wait.ts';

// The layout of /docs at a laptop's width (1440 px) and a phone's (390 px), measured in Chromium:
// no code panel (request samples, example answers, the guides' examples) hides part of a line past
// its edge, and every status tab of every example answer is on screen, inside its strip and not
// covered by anything. Screenshots of each width are kept in ARTIFACTS (test/README.md).

const ARTIFACTS = join(ROOT, '.cache/test-artifacts/docs');
const WIDTHS = [1440, 390];

interface OpenApi {
  info: { description: string };
  paths: Record<string, Record<string, { summary?: string }>>;
  webhooks: Record<string, unknown>;
}

/** A code panel or a tab that does not show whole, with where it is and what was measured. */
interface Misfit {
  where: string;
  what: string;
}

/**
 * Scalar renders an operation's section when it comes near the viewport: scrolls down the page,
 * a look at a time, until every operation and webhook has its request and response cards.
 */
async function renderEverySection(page: Page, sections: number): Promise<void> {
  await until(
    () =>
      page.evaluate(async (expected) => {
        const atBottom = window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 2;
        window.scrollTo(0, atBottom ? 0 : window.scrollY + 2 * window.innerHeight);
        // The frames in which Scalar's observers see what came into view.
        await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
        return (
          document.querySelectorAll('.request-card').length >= expected &&
          document.querySelectorAll('.response-card').length >= expected
        );
      }, sections),
    180_000,
    async () =>
      `every section rendered (${await page.locator('.request-card').count()} of ${sections} request cards)`,
  );
}

/**
 * Code panels that show less than their text: the block (or a box around it, up to its card) is
 * narrower than what it holds, or the panel reaches past its card or the window.
 */
function clippedCodePanels(page: Page): Promise<{ measured: number; misfits: Misfit[] }> {
  return page.evaluate(() => {
    const misfits: { where: string; what: string }[] = [];
    const panels = [...document.querySelectorAll('.scalar-code-block pre, .markdown pre > code')];
    let measured = 0;
    for (const panel of panels) {
      if (panel.clientWidth === 0) continue;
      measured += 1;
      const card = panel.closest('.scalar-card, .markdown') ?? document.body;
      const where = `${panel.closest('section[id]')?.id ?? '(page)'}: ${panel.textContent?.slice(0, 60)}`;
      for (
        let box: Element | null = panel;
        box !== null && box !== card.parentElement;
        box = box.parentElement
      ) {
        if (box.scrollWidth > box.clientWidth + 1) {
          misfits.push({
            where,
            what: `${box.tagName} holds ${box.scrollWidth} px in ${box.clientWidth} px`,
          });
        }
      }
      const inner = panel.getBoundingClientRect();
      const outer = card.getBoundingClientRect();
      if (inner.left < outer.left - 1 || inner.right > outer.right + 1 || inner.right > window.innerWidth) {
        misfits.push({
          where,
          what: `spans ${inner.left}–${inner.right} px, its card ${outer.left}–${outer.right} px`,
        });
      }
    }
    return { measured, misfits };
  });
}

/**
 * Status tabs of the example answers that a reader cannot see and reach: outside the window or
 * their strip, in a strip that scrolls them out of sight, or under another element.
 */
function hiddenStatusTabs(page: Page): Promise<{ measured: number; misfits: Misfit[] }> {
  return page.evaluate(() => {
    const misfits: { where: string; what: string }[] = [];
    let measured = 0;
    for (const strip of document.querySelectorAll('.response-card [role=tablist]')) {
      const where = strip.closest('section[id]')?.id ?? '(page)';
      strip.scrollIntoView({ block: 'center' });
      if (strip.scrollWidth > strip.clientWidth + 1) {
        misfits.push({ where, what: `the strip holds ${strip.scrollWidth} px in ${strip.clientWidth} px` });
      }
      const bounds = strip.getBoundingClientRect();
      for (const tab of strip.querySelectorAll('[role=tab]')) {
        measured += 1;
        const name = `tab ${tab.textContent?.trim()}`;
        const { left, right, top, bottom } = tab.getBoundingClientRect();
        if (left < 0 || right > window.innerWidth)
          misfits.push({ where, what: `${name} at ${left}–${right} px` });
        if (
          left < bounds.left - 1 ||
          right > bounds.right + 1 ||
          top < bounds.top - 1 ||
          bottom > bounds.bottom + 1
        ) {
          misfits.push({ where, what: `${name} outside its strip` });
        }
        const onTop = document.elementFromPoint((left + right) / 2, (top + bottom) / 2);
        if (onTop === null || !tab.contains(onTop)) {
          misfits.push({ where, what: `${name} covered by ${onTop?.tagName}.${String(onTop?.className)}` });
        }
      }
    }
    return { measured, misfits };
  });
}

describe('/docs layout in Chromium (sqlite)', () => {
  let ctx: TestContext;
  let browser: Browser;
  let base: string;
  let document: OpenApi;

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    ctx = await createTestContext('sqlite');
    await ctx.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`;
    document = (await ctx.app.inject({ url: '/openapi.json' })).json();
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await ctx?.close();
  });

  for (const width of WIDTHS) {
    describe(`${width} px wide`, () => {
      let page: Page;
      let sections: number;

      before(async () => {
        const context = await browser.newContext({ viewport: { width, height: 900 } });
        page = await context.newPage();
        await page.goto(`${base}/docs`);
        await page.getByRole('heading', { level: 1 }).waitFor();
        await page.screenshot({ path: join(ARTIFACTS, `docs-${width}-top.png`) });
        const operations = Object.values(document.paths).flatMap((item) =>
          Object.keys(item).filter((key) => key !== 'parameters'),
        );
        sections = operations.length + Object.keys(document.webhooks).length;
        await renderEverySection(page, sections);
      });
      after(() => page?.context().close());

      test('a screenshot of an operation is kept', async () => {
        const summary = document.paths['/api/v1/public/incidents']?.get?.summary ?? '';
        const heading = page.getByRole('heading', { name: summary, exact: true });
        await heading.evaluate((element) => element.scrollIntoView({ block: 'start' }));
        const path = join(ARTIFACTS, `docs-${width}-list-incidents.png`);
        await page.screenshot({ path });
        assert.ok((await heading.boundingBox()) !== null, path);
      });

      test('no code panel hides part of a line past its edge', async () => {
        const { measured, misfits } = await clippedCodePanels(page);
        // A request sample per section, and the guides' examples at least.
        const guides = (document.info.description.match(/^```/gm) ?? []).length / 2;
        assert.ok(measured >= sections + guides, `${measured} code panels measured`);
        assert.deepEqual(misfits, []);
      });

      test('every status tab of every example answer is on screen, in its strip, not covered', async () => {
        const { measured, misfits } = await hiddenStatusTabs(page);
        assert.ok(measured >= 4 * sections, `${measured} tabs measured`);
        assert.deepEqual(misfits, []);
      });
    });
  }
});
