import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { importFile } from '../../src/import/import.ts';
import { EVENT_TYPES } from '../../src/webhooks/events.ts';
import { createTestContext, STORES, seedAccount, seedIncidents, type TestContext } from '../helpers.ts';
import { Receiver } from '../webhooks/receiver.ts';
import { DocumentCheck } from './document-check.ts';

/**
 * The document's `webhooks` section lists every event type with the three Standard Webhooks
 * headers, and real deliveries (to a node:http receiver, from the server's own delivery loop) of
 * every event type match it: headers, body, and the record schemas the list endpoints use.
 */
for (const store of STORES) {
  describe(`OpenAPI webhooks (${store})`, () => {
    let ctx: TestContext;
    let receiver: Receiver;
    let check: DocumentCheck;
    let files: string;

    before(async () => {
      ctx = await createTestContext(store, { WEBHOOKS_ALLOW_PRIVATE: 'true' });
      receiver = await Receiver.start();
      check = await DocumentCheck.of(ctx.app);
      files = mkdtempSync(join(tmpdir(), 'openapi-webhooks-'));
      await ctx.runtime.delivery.start();
    });
    after(async () => {
      await ctx.runtime.delivery.stop();
      await receiver.close();
      await ctx.close();
      rmSync(files, { recursive: true, force: true });
    });

    async function importRecords(records: object[]): Promise<void> {
      const file = join(files, `${randomUUID()}.ndjson`);
      writeFileSync(file, records.map((record) => JSON.stringify(record)).join('\n'));
      await importFile(ctx.commandLineDb, file);
    }

    test('every event type is documented with the three headers, a body and what answers do', () => {
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
        assert.ok(check.at(`/webhooks/${type}/post/requestBody/content/application~1json/schema`));
        const responses = Object.keys(check.at(`/webhooks/${type}/post/responses`) as object).sort();
        assert.deepEqual(responses, ['2XX', '410', 'default'].sort(), type);
      }
      // The record inside an event is the list endpoints' own schema.
      assert.deepEqual(
        check.at('/components/schemas/IncidentUpdatedEvent/properties/data/properties/object'),
        {
          $ref: '#/components/schemas/Incident',
        },
      );
      assert.match(String(check.at('/webhooks/incident.created/post/responses/410/description')), /disabled/);
      assert.match(
        String(check.at('/webhooks/webhook.test/post/responses/default/description')),
        /never retried/,
      );
    });

    test('real deliveries of every event type match the documented events', async () => {
      const accountId = await seedAccount(ctx.db);
      const { endpoint } = await ctx.runtime.services.webhooks.create({
        accountId,
        url: receiver.url(),
        actor: 'test',
      });
      const [first] = await seedIncidents(ctx.db, accountId, 2);
      assert.ok(first);
      await receiver.waitFor(2);
      // Each step waits for its events: one sent later would be compacted with the next change.
      await importRecords([{ ...first, type: 'incident', status: 'closed' }]);
      await receiver.waitFor(3);
      await importRecords([{ type: 'incident', id: first.id, account_id: accountId, deleted: true }]);
      await receiver.waitFor(4);

      const ids = { department: randomUUID(), location: randomUUID(), user: randomUUID() };
      const records = (suffix: string) => [
        { type: 'department', id: ids.department, account_id: accountId, name: `Operations${suffix}` },
        { type: 'location', id: ids.location, account_id: accountId, name: `Warehouse North${suffix}` },
        {
          type: 'user',
          id: ids.user,
          account_id: accountId,
          name: `Amara Okafor${suffix}`,
          email: `${ids.user}@example.com`,
          role: 'manager',
          department: 'Operations',
        },
      ];
      await importRecords(records(''));
      await receiver.waitFor(7);
      await importRecords(records(' (renamed)'));
      await receiver.waitFor(10);
      await importRecords(
        Object.entries(ids).map(([type, id]) => ({ type, id, account_id: accountId, deleted: true })),
      );
      await receiver.waitFor(13);
      const test = await ctx.runtime.services.webhooks.sendTest(endpoint.id);
      assert.equal(test.status, 204);

      const types = receiver.received.map((r) => r.json.type);
      assert.deepEqual(types.slice(0, 4), [
        'incident.created',
        'incident.created',
        'incident.updated',
        'incident.deleted',
      ]);
      assert.deepEqual([...new Set(types)].sort(), [...EVENT_TYPES].sort());
      for (const received of receiver.received)
        check.checkWebhook(received.json.type, received.headers, received.json);
      // The check has teeth: a created event without its record, or unsigned, is not the documented one.
      const created = receiver.received[0];
      assert.ok(created);
      assert.throws(() =>
        check.checkWebhook('incident.created', created.headers, {
          ...created.json,
          data: { ...created.json.data, object: null },
        }),
      );
      assert.throws(() =>
        check.checkWebhook(
          'incident.created',
          { ...created.headers, 'webhook-signature': undefined },
          created.json,
        ),
      );
    });
  });
}
