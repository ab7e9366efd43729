import { type Config, cacheBudgets } from '../config.ts';
import type { DatabaseHandle } from '../db/database.ts';
import type { OutboundClient } from '../webhooks/outbound.ts';
import { ChangeFeedService } from './change-feed-service.ts';
import { ExportService } from './export-service.ts';
import { IncidentService } from './incident-service.ts';
import { WebhookService } from './webhook-service.ts';

/**
 * The services that keep something of their own between calls (a cache, a key loaded once, the
 * snapshots of their database, the outbound HTTP client), each one object per database handle.
 * The other services keep nothing, and are functions of the handle they are given.
 */
export interface Services {
  /** Both APIs' incident lists, with their rank maps. */
  incidents: IncidentService;
  /** The changes feed, with the cursor key. */
  changeFeed: ChangeFeedService;
  /** The public exports, read from the database's snapshots. */
  exports: ExportService;
  /** Webhook endpoints, with the signing secrets' box. */
  webhooks: WebhookService;
}

/**
 * The services of one database handle, the server's (`openRuntime`, src/runtime.ts) or a command's:
 * the one place they are built and handed what they need. `outbound`: the guarded HTTP client of
 * webhook URL checks and test events.
 */
export function buildServices(
  database: DatabaseHandle,
  config: Pick<Config, 'cacheMaxMb' | 'webhookSecretsKey' | 'webhookMaxEndpoints'>,
  outbound: OutboundClient,
): Services {
  const { db } = database;
  const changeFeed = new ChangeFeedService(db);
  return {
    incidents: new IncidentService(db, cacheBudgets(config.cacheMaxMb).rankMaps),
    changeFeed,
    exports: new ExportService(database.snapshots, changeFeed),
    webhooks: new WebhookService({
      db,
      outbound,
      secretsKey: config.webhookSecretsKey,
      maxEndpoints: config.webhookMaxEndpoints,
      changeFeed,
    }),
  };
}
