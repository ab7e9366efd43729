import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { buildServices } from '../../src/services/services.ts';
import { OutboundClient, type PostResult } from '../../src/webhooks/outbound.ts';
import { createTestContext, STORES, seedAccount, type TestContext } from '../helpers.ts';
import { until } from '../wait.ts';
import { importRecords, incident } from './feed.ts';
import { Receiver } from './receiver.ts';

/**
 * Connections of webhook deliveries (issue 41, "false timeouts"): a pool per destination with a
 * cap on all of them, and an attempt's timeout that starts when its request has its connection.
 * Waiting for a connection is not the receiver's time: past its own bound the event is not sent
 * (`not_sent`), which is not held against the receiver.
 */

/** Holds every request's answer until `release` (204 for each). */
function holding(receiver: Receiver): { release(): void } {
  const held: ServerResponse[] = [];
  receiver.answer = (_received, response) => {
    held.push(response);
  };
  return {
    release() {
      for (const response of held.splice(0)) {
        response.statusCode = 204;
        response.end();
      }
    },
  };
}

/** Answers each request 204 after `ms`, as a receiver that takes that long does. */
function answeringAfter(receiver: Receiver, ms: number): void {
  receiver.answer = (_received, response) => {
    setTimeout(() => {
      response.statusCode = 204;
      response.end();
    }, ms);
  };
}

const errors = (results: PostResult[]) => results.filter((r) => r.error !== null).map((r) => r.error);

describe('outbound connections: per destination, with a cap on all', () => {
  test('6 requests through 2 connections to a receiver answering in 400 ms, timeout 1 s: all answered (the wait for a connection is not counted), never more than 2 open', async () => {
    const receiver = await Receiver.start();
    answeringAfter(receiver, 400);
    const client = new OutboundClient({
      allowPrivate: true,
      timeoutMs: 1000,
      connectWithinMs: 20_000,
      maxConnections: 2,
    });
    try {
      // Three rounds of 400 ms: the last requests wait about 800 ms for a connection, and end
      // about 1.2 s after they were asked for, past the 1 s timeout counted from the call.
      const results = await Promise.all(
        Array.from({ length: 6 }, () => client.post(receiver.url(), {}, '{}')),
      );
      assert.deepEqual(errors(results), []);
      assert.deepEqual(
        results.map((r) => r.status),
        [204, 204, 204, 204, 204, 204],
      );
      assert.equal(receiver.maxOpen, 2, 'never more than 2 connections open');
      assert.equal(receiver.connections, 2, 'the 2 connections were used again');
    } finally {
      await client.close();
      await receiver.close();
    }
  });

  test('a destination at its limit holds up only its own requests, not those to another destination', async () => {
    const busy = await Receiver.start();
    const other = await Receiver.start();
    const gate = holding(busy);
    const client = new OutboundClient({
      allowPrivate: true,
      timeoutMs: 20_000,
      maxConnections: 8,
      maxConnectionsPerOrigin: 2,
    });
    try {
      const toBusy = Array.from({ length: 3 }, () => client.post(busy.url(), {}, '{}'));
      await busy.waitFor(2);
      // Two in flight to `busy`, its third waiting for one of them; `other` is answered meanwhile.
      const toOther = await client.post(other.url(), {}, '{}');
      assert.equal(toOther.status, 204);
      assert.equal(busy.received.length, 2);
      assert.equal(busy.maxOpen, 2);
      gate.release();
      await busy.waitFor(3);
      gate.release();
      const results = await Promise.all(toBusy);
      assert.deepEqual(errors(results), []);
      assert.equal(busy.maxOpen, 2);
    } finally {
      await client.close();
      await busy.close();
      await other.close();
    }
  });

  test('no free connection within its bound: not sent, reported as such (not a timeout), the receiver never asked', async () => {
    const holder = await Receiver.start();
    const waiting = await Receiver.start();
    const gate = holding(holder);
    const client = new OutboundClient({
      allowPrivate: true,
      timeoutMs: 20_000,
      connectWithinMs: 300,
      maxConnections: 1,
    });
    try {
      const held = client.post(holder.url(), {}, '{}');
      await holder.waitFor(1);
      const result = await client.post(waiting.url(), {}, '{}');
      assert.equal(result.status, null);
      assert.equal(result.failure, 'not_sent');
      assert.equal(result.error, 'not sent: no free connection within 300 ms');
      assert.equal(waiting.connections, 0, 'never connected');
      gate.release();
      assert.equal((await held).status, 204);
    } finally {
      await client.close();
      await holder.close();
      await waiting.close();
    }
  });

  test('an idle connection to one destination is closed to make room for another at the cap', async () => {
    const first = await Receiver.start();
    const second = await Receiver.start();
    // Idle connections are kept 4 s; the second request may wait 2 s: it gets its connection
    // only if the idle one is closed for it.
    const client = new OutboundClient({
      allowPrivate: true,
      timeoutMs: 20_000,
      connectWithinMs: 2000,
      maxConnections: 1,
    });
    try {
      assert.equal((await client.post(first.url(), {}, '{}')).status, 204);
      assert.equal(first.open, 1, 'kept open, idle');
      const result = await client.post(second.url(), {}, '{}');
      assert.deepEqual([result.status, result.error], [204, null]);
      await until(() => first.open === 0, 10_000, 'the idle connection to the first receiver closed');
      assert.equal(client.openConnections, 1);
    } finally {
      await client.close();
      await first.close();
      await second.close();
    }
  });

  test("the timeout starts once the request has its connection: a slow DNS answer is not the receiver's time", async () => {
    const receiver = await Receiver.start();
    const client = new OutboundClient({
      allowPrivate: true,
      timeoutMs: 1000,
      connectWithinMs: 20_000,
      // A name whose lookup takes 1.5 s, longer than the receiver's whole timeout.
      resolve: (hostname) =>
        new Promise((resolve, reject) => {
          if (hostname !== 'slow-dns.test') reject(new Error(`unexpected name ${hostname}`));
          else setTimeout(() => resolve([{ address: '127.0.0.1', family: 4 }]), 1500);
        }),
    });
    try {
      const result = await client.post(`http://slow-dns.test:${receiver.port}/hook`, {}, '{}');
      assert.deepEqual([result.status, result.error], [204, null]);
      assert.ok(result.durationMs >= 1500, `${result.durationMs} ms, the lookup included`);
    } finally {
      await client.close();
      await receiver.close();
    }
  });

  test('a connection not made within its bound is a timeout that says so', async () => {
    const client = new OutboundClient({
      allowPrivate: true,
      timeoutMs: 20_000,
      connectWithinMs: 300,
      // A lookup that never ends.
      resolve: () => new Promise(() => {}),
    });
    try {
      const result = await client.post('http://never.test/hook', {}, '{}');
      assert.equal(result.failure, 'timeout');
      assert.equal(result.error, 'could not connect within 300 ms (no DNS answer yet)');
    } finally {
      await client.close();
    }
  });

  test('beforeSend: asked once the request has its connection; a reason not to send leaves it unsent', async () => {
    const receiver = await Receiver.start();
    const client = new OutboundClient({ allowPrivate: true, timeoutMs: 20_000 });
    try {
      let asked = 0;
      const refused = await client.post(receiver.url(), {}, '{}', {
        beforeSend: () => {
          asked += 1;
          return 'the lease would run out before its timeout';
        },
      });
      assert.equal(asked, 1);
      assert.equal(refused.failure, 'not_sent');
      assert.equal(refused.error, 'not sent: the lease would run out before its timeout');
      const sent = await client.post(receiver.url(), {}, '{}', { beforeSend: () => null });
      assert.equal(sent.status, 204);
      assert.equal(receiver.received.length, 1, 'only the second request was written');
    } finally {
      await client.close();
      await receiver.close();
    }
  });
});

const ENV = {
  WEBHOOKS_ALLOW_PRIVATE: 'true',
  WEBHOOK_TIMEOUT_MS: '1000',
  WEBHOOK_LEASE_SECONDS: '4',
};

for (const store of STORES) {
  describe(`webhook delivery to many endpoints on one receiver (${store})`, () => {
    let ctx: TestContext;
    before(async () => {
      ctx = await createTestContext(store, ENV);
      await ctx.runtime.delivery.start();
    });
    after(() => ctx.close());

    test('12 endpoints on one healthy receiver answering in ~400 ms, timeout 1 s: every attempt succeeds, none times out', async () => {
      const receiver = await Receiver.start();
      answeringAfter(receiver, 400);
      try {
        const accountId = await seedAccount(ctx.db);
        const endpoints: { id: string }[] = [];
        for (let i = 0; i < 12; i += 1) {
          const { endpoint } = await ctx.runtime.services.webhooks.create({
            accountId,
            url: receiver.url(`/hook/${i}`),
            actor: 'test',
          });
          endpoints.push(endpoint);
        }
        // One change: one event for each endpoint, all 12 sent at once.
        await importRecords(ctx, [incident(accountId, randomUUID(), 1)]);
        // The test's reads go through a handle of their own, without the server's 2 s store
        // deadline: twelve at a time beside the twelve workers, on a busy machine, would otherwise
        // fail on the server's pool (a failure of the test's eyes, not of a delivery).
        const { webhooks } = buildServices(
          { ...ctx.runtime.database, db: ctx.commandLineDb },
          ctx.config,
          ctx.runtime.outbound,
        );
        const shown = () => Promise.all(endpoints.map((e) => webhooks.show(e.id)));
        await until(
          async () => (await shown()).every((endpoint) => endpoint.attempts.length > 0),
          20_000,
          async () =>
            `an attempt for each of the 12 endpoints (${(await shown()).filter((e) => e.attempts.length > 0).length} so far)`,
        );
        const attempts = (await shown()).flatMap((endpoint) => endpoint.attempts);
        assert.deepEqual(
          attempts.filter((attempt) => attempt.status !== 204).map((attempt) => attempt.error),
          [],
          'no attempt failed',
        );
        assert.equal(attempts.length, 12);
        assert.equal(receiver.received.length, 12);
      } finally {
        await receiver.close();
      }
    });
  });
}
