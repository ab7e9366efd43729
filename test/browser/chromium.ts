import axe from 'axe-core';
import { type Browser, chromium, type Page } from 'playwright-core';

/** Debian's chromium package (.ci/run installs it): test tools never download a browser. */
export const CHROMIUM = '/usr/bin/chromium';

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}

export interface Violation {
  id: string;
  impact?: string | null;
  help: string;
  nodes: { target: unknown }[];
}

/**
 * What axe-core finds on the page as it is, every impact. The script is evaluated through the
 * DevTools protocol, which the page's CSP does not govern, so the page keeps its real policy.
 */
export async function axeViolations(page: Page): Promise<Violation[]> {
  await page.evaluate(axe.source);
  return page.evaluate(async () => {
    const run = (window as unknown as { axe: { run(): Promise<{ violations: Violation[] }> } }).axe.run;
    return (await run()).violations.map(({ id, impact, help, nodes }) => ({
      id,
      impact,
      help,
      nodes: nodes.map((node) => ({ target: node.target })),
    }));
  });
}
