import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { createTestContext, STORES, seedAccount, type TestContext } from '../helpers.ts';
import { until } from '../wait.ts';
import { importRecords, incident } from '../webhooks/feed.ts';
import { type Received, Receiver } from '../webhooks/receiver.ts';

/**
 * `WebhookService.update` against a running delivery loop, and the bounds of `create` when
 * creations race each other (docs/webhooks.md, "Editing an endpoint" and "Bounds").
 */

const MAX = 20;

function verify(secret: string, received: Received): unknown {
  return new Webhook(secret).verify(received.body, {
    'webhook-id': String(received.headers['webhook-id']),
    'webhook-timestamp': String(received.headers['webhook-timestamp']),
    'webhook-signature': String(received.headers['webhook-signature']),
  });
}

for (const store of STORES) {
  describe(`webhook endpoints: edit and bounds (${store})`, () => {
    let ctx: TestContext;
    let accountId: string;
    let old: Receiver;
    let moved: Receiver;

    before(async () => {
      ctx = await createTestContext(store, {
        WEBHOOKS_ALLOW_PRIVATE: 'true',
        WEBHOOK_TIMEOUT_MS: '2000',
        WEBHOOK_LEASE_SECONDS: '4',
      });
      await ctx.runtime.delivery.start();
    });
    after(() => ctx.close());
    beforeEach(async () => {
      [old, moved] = await Promise.all([Receiver.start(), Receiver.start()]);
      accountId = await seedAccount(ctx.db);
    });
    afterEach(async () => {
      await Promise.all([old.close(), moved.close()]);
    });

    test('a new URL takes the event the endpoint is stuck on, from the same position, signed with the same secret', async () => {
      old.answer = (_received, response) => {
        response.statusCode = 500;
        response.end('down');
      };
      const { endpoint, secret } = await ctx.runtime.services.webhooks.create({
        accountId,
        url: old.url(),
        actor: 'test',
      });
      const [first, second] = [randomUUID(), randomUUID()];
      await importRecords(ctx, [incident(accountId, first, 1)]);
      await old.waitFor(1);
      await until(
        async () => (await ctx.runtime.services.webhooks.show(endpoint.id)).failing_since !== null,
        5000,
        'the failure recorded',
      );
      const stuck = await ctx.runtime.services.webhooks.show(endpoint.id);

      const edited = await ctx.runtime.services.webhooks.update(endpoint.id, 'test', {
        url: moved.url('/v2'),
        events: 'incident.*',
      });
      assert.equal(edited.position, stuck.position, 'the position stays');
      assert.equal(edited.state, 'active');
      assert.equal(edited.failing_since, null, 'the old receiver’s failures are not the new one’s');
      assert.deepEqual(edited.events, ['incident.*']);

      // The running loop sends the stuck event to the new URL, at once rather than on the old
      // receiver's retry schedule, then what follows.
      await moved.waitFor(1);
      const [retried] = moved.received as [Received];
      assert.equal(retried.json.data.id, first);
      assert.equal(retried.headers['webhook-id'], old.received[0]?.headers['webhook-id'], 'the same event');
      assert.deepEqual(verify(secret, retried), retried.json, 'signed with the secret shown at creation');
      await importRecords(ctx, [incident(accountId, second, 2)]);
      await moved.waitFor(2);
      assert.equal(moved.received[1]?.json.data.id, second);
      assert.deepEqual(verify(secret, moved.received[1] as Received), moved.received[1]?.json);
      await until(
        async () => (await ctx.runtime.services.webhooks.show(endpoint.id)).lag === 0,
        5000,
        'caught up',
      );
      // Every event the old receiver got came before the edit: the one it failed.
      assert.ok(old.received.every((received) => received.json.data.id === first));
    });

    test(`concurrent creations cannot pass ${MAX} endpoints, nor two for one URL and filter`, async () => {
      const attempts = Array.from({ length: MAX + 5 }, (_, i) =>
        ctx.runtime.services.webhooks.create({
          accountId,
          url: old.url(`/${i}`),
          actor: 'test',
        }),
      );
      const settled = await Promise.allSettled(attempts);
      const refused = settled.filter((result) => result.status === 'rejected');
      assert.equal(
        settled.length - refused.length,
        MAX,
        `refused: ${[...new Set(refused.map((result) => String(result.reason)))].join('; ')}`,
      );
      for (const result of refused) {
        assert.match(
          String(result.reason),
          new RegExp(
            `the account already has ${MAX} webhook endpoints, the most it may have \\(WEBHOOK_MAX_ENDPOINTS=${MAX}\\)`,
          ),
        );
      }
      assert.equal((await ctx.runtime.services.webhooks.list(accountId)).length, MAX);

      const other = await seedAccount(ctx.db);
      const same = await Promise.allSettled(
        Array.from({ length: 5 }, (_, i) =>
          ctx.runtime.services.webhooks.create({
            accountId: other,
            url: old.url('/same'),
            // One filter, spelled five ways.
            events: [
              'user.*,incident.*',
              'incident.*, user.*',
              'user.*,incident.*,incident.created',
              'incident.*,user.*,user.deleted',
              'user.*, incident.*, user.*',
            ][i],
            actor: 'test',
          }),
        ),
      );
      assert.equal(same.filter((result) => result.status === 'fulfilled').length, 1);
      for (const result of same) {
        if (result.status === 'rejected')
          assert.match(String(result.reason), /already has a webhook endpoint for this URL and these events/);
      }
      const [kept] = await ctx.runtime.services.webhooks.list(other);
      assert.deepEqual(kept?.events, ['incident.*', 'user.*']);
    });

    test('the store itself refuses a second endpoint for one URL and filter', async () => {
      const { endpoint } = await ctx.runtime.services.webhooks.create({
        accountId,
        url: old.url(),
        actor: 'test',
      });
      const row = await ctx.db
        .selectFrom('webhook_endpoints')
        .selectAll()
        .where('id', '=', endpoint.id)
        .executeTakeFirstOrThrow();
      await assert.rejects(
        ctx.db
          .insertInto('webhook_endpoints')
          .values({ ...row, id: randomUUID() })
          .execute(),
        /unique|duplicate/i,
      );
    });
  });
}
