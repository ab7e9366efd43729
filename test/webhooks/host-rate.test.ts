import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import type { Redis } from 'ioredis';
import {
  ColumnNode,
  type Kysely,
  type KyselyPlugin,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RootOperationNode,
  type UnknownRow,
  UpdateQueryNode,
} from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import { StoreUnavailableError } from '../../src/db/store-health.ts';
import { openRedis, redisReady } from '../../src/redis.ts';
import { WebhookDispatcher } from '../../src/webhooks/delivery.ts';
import { type HostRate, HostRateLimiter } from '../../src/webhooks/host-rate.ts';
import { createTestContext, REDIS_URL, STORES, seedAccount, type TestContext } from '../helpers.ts';
import { until } from '../wait.ts';
import { testDispatcher } from './dispatcher.ts';
import { importRecords, incident } from './feed.ts';
import { type Received, Receiver } from './receiver.ts';

/**
 * The rate per destination host (WEBHOOK_HOST_RATE): endpoints on one host get at most the rate
 * together, from every instance (through Redis), each event still delivered and none counted as a
 * failure; another host is not slowed by it. The rate is counted in windows of one second, fixed
 * (rate-limiter-flexible's): any whole second of sending overlaps two of them at most, so it may
 * hold up to twice the rate (the limiter's own tolerance), and N events need at least N / rate
 * windows, one after the other.
 */

const ENV = {
  WEBHOOKS_ALLOW_PRIVATE: 'true',
  WEBHOOK_TIMEOUT_MS: '2000',
  WEBHOOK_LEASE_SECONDS: '4',
};
const RATE = 5;

/** Keeps an instance from claiming endpoints while `on`: its claims fail as a store that is away fails them. */
class NoClaims implements KyselyPlugin {
  on = false;

  transformQuery({ node }: PluginTransformQueryArgs): RootOperationNode {
    if (this.on && UpdateQueryNode.is(node) && setsColumn(node, 'lease_owner'))
      throw new StoreUnavailableError('claims held back by the test');
    return node;
  }

  async transformResult({ result }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return result;
  }
}

function setsColumn(node: UpdateQueryNode, column: string): boolean {
  return (node.updates ?? []).some(
    (update) => ColumnNode.is(update.column) && update.column.column.name === column,
  );
}

/** The attempts by the whole second of their `webhook-timestamp` (when each was signed, just after the rate let it go). */
function perSecond(received: Received[]): Map<number, number> {
  const seconds = new Map<number, number>();
  for (const r of received) {
    const second = Number(r.headers['webhook-timestamp']);
    seconds.set(second, (seconds.get(second) ?? 0) + 1);
  }
  return seconds;
}

/** Each endpoint (by path) got its events once, in feed order. */
function assertEachInOrder(received: Received[], paths: string[], count: number): void {
  for (const path of paths) {
    const seqs = received.filter((r) => r.path === path).map((r) => r.json.data.seq ?? 0);
    assert.equal(seqs.length, count, `${path}: ${count} events, each once`);
    assert.deepEqual(
      seqs,
      [...seqs].sort((a, b) => a - b),
      `${path}: in feed order`,
    );
  }
}

describe('HostRateLimiter', () => {
  test("in process: a host's window holds the rate, another host's is its own, and the next window has room again", async (t) => {
    t.mock.timers.enable({ apis: ['Date', 'setTimeout'], now: Date.now() });
    const limiter = new HostRateLimiter(3, null);
    for (let i = 0; i < 3; i += 1) assert.equal(await limiter.take('hooks.example.com'), null);
    const wait = await limiter.take('HOOKS.example.com');
    assert.ok(wait !== null && wait > 0 && wait <= 1000, `over the rate: wait ${wait} ms`);
    assert.equal(await limiter.take('other.example.com'), null, 'another host is not held');
    t.mock.timers.tick(1000);
    assert.equal(await limiter.take('hooks.example.com'), null, 'room again in the next window');
  });
});

for (const [index, store] of STORES.entries()) {
  describe(`the rate per destination host (${store})`, () => {
    let ctx: TestContext;
    let accountId: string;
    const dispatchers: WebhookDispatcher[] = [];
    const receivers: Receiver[] = [];
    const connections: Redis[] = [];
    // Loopback addresses of this file's own, per store: no other test's deliveries count on them.
    const host = (n: number) => `127.0.0.${10 + index * 10 + n}`;

    before(async () => {
      ctx = await createTestContext(store, ENV);
    });
    after(() => ctx.close());
    beforeEach(async () => {
      accountId = await seedAccount(ctx.db);
    });
    afterEach(async () => {
      for (const dispatcher of dispatchers.splice(0)) await dispatcher.stop();
      for (const receiver of receivers.splice(0)) await receiver.close();
      for (const connection of connections.splice(0)) connection.disconnect();
      await ctx.db.deleteFrom('webhook_endpoints').execute();
    });

    async function receiverOn(address: string): Promise<Receiver> {
      const receiver = await Receiver.start(address);
      receivers.push(receiver);
      return receiver;
    }

    /** A dispatcher as an instance runs it, with its own host rate. */
    async function startDispatcher(
      hostRate: HostRate,
      db: Kysely<Database> = ctx.db,
    ): Promise<WebhookDispatcher> {
      const dispatcher = testDispatcher(ctx, { db, hostRate });
      dispatchers.push(dispatcher);
      await dispatcher.start();
      return dispatcher;
    }

    const createEndpoint = async (receiver: Receiver, path: string) =>
      (await ctx.runtime.services.webhooks.create({ accountId, url: receiver.url(path), actor: 'test' }))
        .endpoint;

    test('two instances sharing Redis: four endpoints on one host get at most the rate together, and every event arrives, none failed', async () => {
      const receiver = await receiverOn(host(1));
      // Connected before they count: a connection not yet ready counts in the instance's memory.
      const redis = async () => {
        const connection = openRedis(REDIS_URL);
        connections.push(connection);
        assert.ok(await redisReady(connection, 10_000), 'Redis answers');
        return connection;
      };
      // Each instance holds two of the endpoints: the second takes its two while the first cannot claim.
      const noClaims = new NoClaims();
      const first = await startDispatcher(
        new HostRateLimiter(RATE, await redis()),
        ctx.db.withPlugin(noClaims),
      );
      const endpoints = [await createEndpoint(receiver, '/a'), await createEndpoint(receiver, '/b')];
      await until(() => first.held === 2, 10_000, 'the first instance holding two endpoints');
      noClaims.on = true;
      const second = await startDispatcher(new HostRateLimiter(RATE, await redis()));
      endpoints.push(await createEndpoint(receiver, '/c'), await createEndpoint(receiver, '/d'));
      await until(() => second.held === 2, 10_000, 'the second instance holding two endpoints');
      noClaims.on = false;

      const events = 10;
      await importRecords(
        ctx,
        Array.from({ length: events }, (_, i) => incident(accountId, randomUUID(), i + 1)),
      );
      const total = events * endpoints.length;
      await receiver.waitFor(total, 60_000);

      assertEachInOrder(receiver.received, ['/a', '/b', '/c', '/d'], events);
      const seconds = perSecond(receiver.received);
      assert.ok(
        [...seconds.values()].every((count) => count <= 2 * RATE),
        `at most twice the rate in any second: ${JSON.stringify([...seconds])}`,
      );
      // 40 events at 5 a window need 8 windows, one after the other: the last attempt is at least
      // 6 s after the first (5 in whole seconds; 4 allows the first a second's delay on a busy
      // machine). Unbounded, they all leave within the same second or two.
      const [firstSecond, lastSecond] = [Math.min(...seconds.keys()), Math.max(...seconds.keys())];
      assert.ok(lastSecond - firstSecond >= 4, `sent over ${lastSecond - firstSecond} s`);
      // Held back, not failed: every attempt the delivery log has was accepted.
      for (const endpoint of endpoints) {
        const shown = await ctx.runtime.services.webhooks.show(endpoint.id);
        assert.equal(shown.failing_since, null);
        assert.ok(shown.attempts.every((attempt) => attempt.status === 204));
      }
    });

    test("in process (no Redis): one host's rate does not slow another host", async () => {
      const busy = await receiverOn(host(2));
      const other = await receiverOn(host(3));
      await startDispatcher(new HostRateLimiter(RATE, null));
      for (const path of ['/a', '/b', '/c']) await createEndpoint(busy, path);
      // The other host's endpoint hears of incidents only: as many events as one window allows.
      const otherEndpoint = await ctx.runtime.services.webhooks.create({
        accountId,
        url: other.url('/x'),
        events: 'incident.created',
        actor: 'test',
      });
      const records = Array.from({ length: RATE * 2 }, (_, i) => ({
        type: 'department',
        id: randomUUID(),
        account_id: accountId,
        name: `Department ${i}`,
        active: true,
        created_at: '2025-01-01T00:00:00.000Z',
      }));
      const incidents = Array.from({ length: RATE }, (_, i) => incident(accountId, randomUUID(), i + 1));
      // 45 events for the busy host (9 windows at least), 5 for the other.
      await importRecords(ctx, [...incidents, ...records]);
      const busyTotal = 3 * (records.length + incidents.length);
      await other.waitFor(RATE, 20_000);
      assert.ok(
        busy.received.length < busyTotal,
        `the other host had its events while the busy one still waited (${busy.received.length} of ${busyTotal})`,
      );
      await busy.waitFor(busyTotal, 60_000);
      assertEachInOrder(busy.received, ['/a', '/b', '/c'], busyTotal / 3);
      assert.ok(
        [...perSecond(busy.received).values()].every((count) => count <= 2 * RATE),
        JSON.stringify([...perSecond(busy.received)]),
      );
      assert.equal((await ctx.runtime.services.webhooks.show(otherEndpoint.endpoint.id)).lag, 0);
    });
  });
}
