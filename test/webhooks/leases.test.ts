import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { WebhookDispatcher } from '../../src/webhooks/delivery.ts';
import type { DeliveryFeed } from '../../src/webhooks/fetch-batch.ts';
import { createTestContext, STORES, seedAccount, type TestContext } from '../helpers.ts';
import { until } from '../wait.ts';
import { testDispatcher } from './dispatcher.ts';
import { importRecords, incident } from './feed.ts';
import { Receiver } from './receiver.ts';

/**
 * Leases on the database's clock, checked again before each POST: an instance whose clock is off
 * does not take a lease another holds; an endpoint disabled, deleted or skipped past through
 * another instance while a POST is about to leave is not posted to; a holder whose lease has too
 * little time left on the database's clock, or none, does not send.
 *
 * Each test runs dispatchers of its own on the context's database (the context's own stays
 * stopped: it is the "other instance" whose services disable, delete and skip).
 */

const ENV = {
  WEBHOOKS_ALLOW_PRIVATE: 'true',
  WEBHOOK_TIMEOUT_MS: '2000',
  WEBHOOK_LEASE_SECONDS: '4',
};
/** The dispatchers' lease: long, so that no renewal or claim of theirs comes by itself during a test. */
const LONG_LEASE_SECONDS = 120;

/**
 * The feed as a dispatcher reads it, with a hold: once armed, the next read returns its batch only
 * when let go. The worker then has its events in hand, and the next thing it does is POST them.
 */
class HeldFeed implements DeliveryFeed {
  private armed = false;
  private release: () => void = () => {};
  private held: Promise<void> = Promise.resolve();
  private reachedResolve: () => void = () => {};
  /** Resolves once an armed read has its batch. */
  reached: Promise<void> = Promise.resolve();

  private readonly feed: DeliveryFeed;

  constructor(feed: DeliveryFeed) {
    this.feed = feed;
  }

  arm(): void {
    this.armed = true;
    this.held = new Promise((resolve) => {
      this.release = resolve;
    });
    this.reached = new Promise((resolve) => {
      this.reachedResolve = resolve;
    });
  }

  letGo(): void {
    this.release();
  }

  async after(accountId: string, position: number, limit: number) {
    const batch = await this.feed.after(accountId, position, limit);
    if (this.armed && batch.changes.length > 0) {
      this.armed = false;
      this.reachedResolve();
      await this.held;
    }
    return batch;
  }

  cursors() {
    return this.feed.cursors();
  }
}

for (const store of STORES) {
  describe(`webhook leases on the database's clock (${store})`, () => {
    let ctx: TestContext;
    let receiver: Receiver;
    let accountId: string;
    const dispatchers: WebhookDispatcher[] = [];
    let warnings: { message: string; reason: unknown; receivedBefore: number }[] = [];

    before(async () => {
      ctx = await createTestContext(store, ENV);
    });
    after(() => ctx.close());
    beforeEach(async () => {
      receiver = await Receiver.start();
      accountId = await seedAccount(ctx.db);
      warnings = [];
    });
    afterEach(async () => {
      for (const dispatcher of dispatchers.splice(0)) await dispatcher.stop();
      await receiver.close();
      await ctx.db.deleteFrom('webhook_endpoints').execute();
    });

    /** A dispatcher as an instance runs it, with `clock` as its own clock, reading the feed through `feed`. */
    async function startDispatcher({
      clock,
      feed = ctx.runtime.services.changeFeed,
    }: { clock?: () => number; feed?: DeliveryFeed } = {}): Promise<WebhookDispatcher> {
      const dispatcher = testDispatcher(ctx, {
        feed,
        leaseSeconds: LONG_LEASE_SECONDS,
        ...(clock === undefined ? {} : { clock }),
        logger: {
          info() {},
          warn: (details, message) =>
            warnings.push({
              message,
              reason: (details as { reason?: unknown }).reason,
              receivedBefore: receiver.received.length,
            }),
          error() {},
        },
      });
      dispatchers.push(dispatcher);
      await dispatcher.start();
      return dispatcher;
    }

    const createEndpoint = async () =>
      (await ctx.runtime.services.webhooks.create({ accountId, url: receiver.url(), actor: 'test' }))
        .endpoint;

    const leaseOwner = async (id: string) =>
      (
        await ctx.db
          .selectFrom('webhook_endpoints')
          .select('lease_owner')
          .where('id', '=', id)
          .executeTakeFirstOrThrow()
      ).lease_owner;

    test('an instance whose clock runs an hour ahead does not take the lease another holds', async () => {
      const endpoint = await createEndpoint();
      const holder = await startDispatcher();
      await until(() => holder.held === 1, 5000, 'the endpoint held');
      // On its own clock, the holder's lease ran out long ago.
      const skewed = await startDispatcher({ clock: () => Date.now() + 3_600_000 });
      assert.equal(skewed.held, 0, 'the skewed instance took nothing at its first claim');
      const id = randomUUID();
      await importRecords(ctx, [incident(accountId, id, 1)]);
      await receiver.waitFor(1);
      await until(
        async () => (await ctx.runtime.services.webhooks.show(endpoint.id)).lag === 0,
        10_000,
        'the event acknowledged',
      );
      assert.equal(skewed.held, 0, 'nor at the claims the commits caused');
      assert.equal((await leaseOwner(endpoint.id))?.split('/')[0], holder.instanceId);
      assert.deepEqual(
        receiver.received.map((r) => r.json.data.id),
        [id],
      );
    });

    for (const { change, make } of [
      {
        change: 'disabled',
        make: (id: string) => ctx.runtime.services.webhooks.disable(id, 'test').then(() => {}),
      },
      { change: 'deleted', make: (id: string) => ctx.runtime.services.webhooks.delete(id, 'test') },
    ]) {
      test(`an endpoint ${change} through another instance while a POST is about to leave is not posted to`, async () => {
        const feed = new HeldFeed(ctx.runtime.services.changeFeed);
        const endpoint = await createEndpoint();
        const dispatcher = await startDispatcher({ feed });
        await until(() => dispatcher.held === 1, 5000, 'the endpoint held');
        feed.arm();
        await importRecords(ctx, [incident(accountId, randomUUID(), 1)]);
        await feed.reached;
        // The worker has its batch in hand; the other instance changes the endpoint now.
        await make(endpoint.id);
        feed.letGo();
        await until(() => dispatcher.held === 0, 10_000, 'the worker ended');
        assert.equal(receiver.received.length, 0, 'nothing was posted');
      });
    }

    test('an endpoint skipped past through another instance while its retry is about to leave: the skipped event is not posted again', async () => {
      receiver.answer = (received, response) => {
        response.statusCode = receiver.received.indexOf(received) === 0 ? 500 : 204;
        response.end();
      };
      const feed = new HeldFeed(ctx.runtime.services.changeFeed);
      const endpoint = await createEndpoint();
      const dispatcher = await startDispatcher({ feed });
      await until(() => dispatcher.held === 1, 5000, 'the endpoint held');
      const [stuck, next] = [randomUUID(), randomUUID()];
      await importRecords(ctx, [incident(accountId, stuck, 1)]);
      await until(
        async () => (await ctx.runtime.services.webhooks.show(endpoint.id)).next_attempt_at !== null,
        10_000,
        'the failure recorded',
      );
      // The retry (about 5 s later) reads the feed again, and is held there.
      feed.arm();
      await feed.reached;
      await ctx.runtime.services.webhooks.skip(endpoint.id, 'test');
      feed.letGo();
      // A later event is delivered: the endpoint goes on from past the skipped one.
      await importRecords(ctx, [incident(accountId, next, 2)]);
      await until(() => receiver.received.some((r) => r.json.data.id === next), 20_000, 'the next event');
      assert.deepEqual(
        receiver.received.map((r) => r.json.data.id),
        [stuck, next],
        'the skipped event was sent once, before the skip',
      );
    });

    // The lease is cut to `expiresInMs` on the database's clock behind the holder's back, as late
    // renewals would leave it (a stalled event loop, a slow store). On SQLite a lease that ran out
    // would be claimed again at once by the holder's own next round (the commit watch sees the
    // change), and the new claim's worker would send: there it is cut to less than the POST's
    // timeout (2 s), not yet run out. On PostgreSQL nothing wakes a round (no NOTIFY).
    const cuts = [
      { what: 'too little time left', expiresInMs: 1500 },
      ...(store === 'postgres' ? [{ what: 'run out', expiresInMs: -1000 }] : []),
    ];
    for (const { what, expiresInMs } of cuts) {
      test(`a holder whose lease has ${what} on the database's clock does not send, and sends once it renewed`, async () => {
        const feed = new HeldFeed(ctx.runtime.services.changeFeed);
        const endpoint = await createEndpoint();
        const dispatcher = await startDispatcher({ feed });
        await until(() => dispatcher.held === 1, 5000, 'the endpoint held');
        feed.arm();
        const id = randomUUID();
        await importRecords(ctx, [incident(accountId, id, 1)]);
        await feed.reached;
        // The database's clock and this process's are the same machine's here.
        await ctx.db
          .updateTable('webhook_endpoints')
          .set({ lease_expires_at: new Date(Date.now() + expiresInMs).toISOString() })
          .where('id', '=', endpoint.id)
          .execute();
        feed.letGo();
        await until(
          () => warnings.some((w) => w.message.startsWith('webhook event not sent')),
          10_000,
          'the event not sent',
        );
        const warning = warnings.find((w) => w.message.startsWith('webhook event not sent'));
        assert.match(
          String(warning?.reason),
          /lease would run out before its timeout, on the database's clock/,
        );
        assert.equal(warning?.receivedBefore, 0, 'nothing was posted under the short lease');
        // The holder renewed at once and sends it.
        await receiver.waitFor(1);
        assert.equal(receiver.received[0]?.json.data.id, id);
        assert.equal((await leaseOwner(endpoint.id))?.split('/')[0], dispatcher.instanceId);
      });
    }
  });
}
