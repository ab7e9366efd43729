import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { importFile } from '../../src/import/import.ts';
import { webhookService } from '../../src/services/webhook-service.ts';
import { EVENT_TYPES } from '../../src/webhooks/events.ts';
import { createTestContext, STORES, seedAccount, seedIncidents, type TestContext } from '../helpers.ts';
import { Receiver } from '../webhooks/receiver.ts';
import { DocumentCheck } from './document-check.ts';

/** The document's `webhooks` section lists every event, and real deliveries match it. */
for (const store of STORES) {
  describe(`OpenAPI webhooks (${store})`, () => {
    let ctx: TestContext;
    let receiver: Receiver;
    let check: DocumentCheck;

    before(async () => {
      ctx = await createTestContext(store, { WEBHOOKS_ALLOW_PRIVATE: 'true' });
      await ctx.services.webhooks.start();
      receiver = await Receiver.start();
      check = await DocumentCheck.of(ctx.app);
    });
    after(async () => {
      await receiver.close();
      await ctx.close();
    });

    test('every event type is documented with the three headers and a body', () => {
      const webhooks = check.at('/webhooks');
      assert.deepEqual(Object.keys(webhooks as object).sort(), [...EVENT_TYPES].sort());
      for (const type of EVENT_TYPES) {
        const names = (check.at(`/webhooks/${type}/post/parameters`) as { name: string; in: string }[]).map(
          (p) => `${p.in}:${p.name}`,
        );
        assert.deepEqual(names, [
          'header:webhook-id',
          'header:webhook-timestamp',
          'header:webhook-signature',
        ]);
      }
    });

    test('real deliveries (created, updated, deleted, test) match the documented events', async () => {
      const accountId = await seedAccount(ctx.db);
      const { endpoint } = await webhookService.create(ctx.services.webhookDeps, {
        accountId,
        url: receiver.url(),
        actor: 'test',
      });
      const [first] = await seedIncidents(ctx.db, accountId, 2);
      await receiver.waitFor(2);
      // An update of the first, then a deletion of it, as an import makes them.
      const dir = mkdtempSync(join(tmpdir(), 'openapi-webhooks-'));
      const file = join(dir, `${randomUUID()}.ndjson`);
      writeFileSync(file, JSON.stringify({ ...first, type: 'incident', status: 'closed' }));
      await importFile(ctx.db, file);
      writeFileSync(
        file,
        JSON.stringify({ type: 'incident', id: first?.id, account_id: accountId, deleted: true }),
      );
      await importFile(ctx.db, file);
      await receiver.waitFor(4);
      rmSync(dir, { recursive: true, force: true });
      await webhookService.sendTest(ctx.services.webhookDeps, endpoint.id);
      assert.deepEqual(
        receiver.received.map((r) => r.json.type),
        ['incident.created', 'incident.created', 'incident.updated', 'incident.deleted', 'webhook.test'],
      );
      for (const received of receiver.received)
        check.checkWebhook(received.json.type, received.headers, received.json);
    });
  });
}
