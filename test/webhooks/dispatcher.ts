import { type DispatcherOptions, WebhookDispatcher } from '../../src/webhooks/delivery.ts';
import type { TestContext } from '../helpers.ts';

/**
 * A webhook dispatcher as an instance of `ctx` runs it (its store, services, outbound client and
 * settings, a silent logger), with what a test changes in `options`; not started.
 */
export function testDispatcher(
  ctx: TestContext,
  options: Partial<DispatcherOptions> = {},
): WebhookDispatcher {
  const { config, runtime } = ctx;
  return new WebhookDispatcher({
    db: ctx.db,
    feed: runtime.services.changeFeed,
    secrets: runtime.services.webhooks,
    store: runtime.database.store,
    databaseUrl: config.migrationDatabaseUrl,
    outbound: runtime.outbound,
    leaseSeconds: config.webhookLeaseSeconds,
    timeoutMs: config.webhookTimeoutMs,
    disableAfterHours: config.webhookDisableAfterHours,
    logger: { info() {}, warn() {}, error() {} },
    ...options,
  });
}
