import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import {
  ColumnNode,
  type KyselyPlugin,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RootOperationNode,
  type UnknownRow,
  UpdateQueryNode,
} from 'kysely';
import { auditRepository } from '../../src/db/repositories/audit-events.ts';
import { StoreUnavailableError } from '../../src/db/store-health.ts';
import { buildServices } from '../../src/services/services.ts';
import { WebhookDispatcher } from '../../src/webhooks/delivery.ts';
import { bearer, createTestContext, STORES, seedAccount, seedKey, type TestContext } from '../helpers.ts';
import { testDispatcher } from './dispatcher.ts';
import { importRecords, incident } from './feed.ts';
import { type Received, Receiver } from './receiver.ts';
import { sleep, until } from '../wait.ts';

/**
 * Webhook deliveries in one server instance, on each store, to real HTTP receivers: changes made by
 * imports (the path the CLI takes) arrive complete, in feed order, signed, and typed created,
 * updated or deleted; failures hold the endpoint and are retried with the same webhook-id.
 */

const ENV = {
  WEBHOOKS_ALLOW_PRIVATE: 'true',
  WEBHOOK_TIMEOUT_MS: '2000',
  WEBHOOK_LEASE_SECONDS: '4',
};

function verify(secret: string, received: Received): unknown {
  const headers = {
    'webhook-id': String(received.headers['webhook-id']),
    'webhook-timestamp': String(received.headers['webhook-timestamp']),
    'webhook-signature': String(received.headers['webhook-signature']),
  };
  return new Webhook(secret).verify(received.body, headers);
}

/**
 * Fails the next `count` writes of an endpoint's position (the delivery loop's flush) with `error`,
 * as the store does to a worker in an outage, when the pool's queue is full, or when an import
 * holds SQLite's write lock.
 */
class FailingPositionWrites implements KyselyPlugin {
  private count = 0;
  private error: () => Error = () => new Error('unset');
  failed = 0;

  failNext(count: number, error: () => Error): void {
    this.count = count;
    this.error = error;
  }

  transformQuery({ node }: PluginTransformQueryArgs): RootOperationNode {
    if (this.count > 0 && UpdateQueryNode.is(node) && writesPosition(node)) {
      this.count -= 1;
      this.failed += 1;
      throw this.error();
    }
    return node;
  }

  async transformResult({ result }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return result;
  }
}

function writesPosition(node: UpdateQueryNode): boolean {
  return (node.updates ?? []).some(
    (update) => ColumnNode.is(update.column) && update.column.column.name === 'position',
  );
}

for (const store of STORES) {
  describe(`webhook delivery (${store})`, () => {
    let ctx: TestContext;
    let receiver: Receiver;
    let accountId: string;

    before(async () => {
      ctx = await createTestContext(store, ENV);
      await ctx.runtime.delivery.start();
    });
    after(async () => {
      await ctx.close();
    });
    beforeEach(async () => {
      receiver = await Receiver.start();
      accountId = await seedAccount(ctx.db);
    });
    afterEach(() => receiver.close());

    const create = async (events?: string, path?: string) =>
      ctx.runtime.services.webhooks.create({
        accountId,
        url: receiver.url(path),
        events,
        actor: 'test',
      });

    test('1,000 changes arrive complete, in feed order, each once, signed (verified by standardwebhooks), typed created', async () => {
      const { endpoint, secret } = await create();
      const ids = Array.from({ length: 1000 }, () => randomUUID());
      await importRecords(
        ctx,
        ids.map((id, i) => incident(accountId, id, i + 1)),
      );
      await receiver.waitFor(1000, 30_000);
      await sleep(200);
      assert.equal(receiver.received.length, 1000, 'nothing twice');
      const seqs = receiver.received.map((r) => r.json.data.seq ?? 0);
      assert.deepEqual(
        seqs,
        [...seqs].sort((a, b) => a - b),
        'in feed order',
      );
      assert.equal(new Set(seqs).size, 1000);
      assert.deepEqual(new Set(receiver.received.map((r) => r.json.data.id)), new Set(ids));
      for (const received of receiver.received) {
        assert.deepEqual(verify(secret, received), received.json);
        assert.equal(received.json.type, 'incident.created');
        assert.equal(received.headers['content-type'], 'application/json');
        assert.match(String(received.headers['webhook-id']), /^msg_/);
      }
      // The object is the list endpoints' rendering; the cursor continues /changes after this event.
      const last = receiver.received.at(-1) as Received;
      const listed = await ctx.app.inject({
        url: `/api/v1/public/incidents/${last.json.data.id}`,
        headers: bearer((await seedKey(ctx.db, accountId)).rawKey),
      });
      assert.deepEqual(last.json.data.object, listed.json().data);
      const shown = await ctx.runtime.services.webhooks.show(endpoint.id);
      assert.equal(shown.lag, 0);
      assert.equal(shown.last_status, 204);
      assert.equal(shown.position, last.json.data.seq);
    });

    test('created, updated and deleted: an update is updated, a deletion deleted with a null object, a record back in view created', async () => {
      await create();
      const [a, b] = [randomUUID(), randomUUID()];
      const department = randomUUID();
      await importRecords(ctx, [
        incident(accountId, a, 1),
        incident(accountId, b, 2),
        {
          type: 'department',
          id: department,
          account_id: accountId,
          name: 'Safety',
          active: true,
          created_at: '2025-01-01T00:00:00.000Z',
        },
      ]);
      await receiver.waitFor(3);
      await importRecords(ctx, [incident(accountId, a, 1, { status: 'closed' })]);
      await receiver.waitFor(4);
      await importRecords(ctx, [
        { type: 'incident', id: b, account_id: accountId, deleted: true },
        { type: 'department', id: department, account_id: accountId, deleted: true },
      ]);
      await receiver.waitFor(6);
      await importRecords(ctx, [
        {
          type: 'department',
          id: department,
          account_id: accountId,
          name: 'Safety',
          active: true,
          created_at: '2025-01-01T00:00:00.000Z',
        },
      ]);
      await receiver.waitFor(7);
      const events = receiver.received.map((r) => [r.json.type, r.json.data.id]);
      assert.deepEqual(events, [
        ['incident.created', a],
        ['incident.created', b],
        ['department.created', department],
        ['incident.updated', a],
        ['incident.deleted', b],
        ['department.deleted', department],
        ['department.created', department],
      ]);
      assert.equal(receiver.received[4]?.json.data.object, null);
      assert.deepEqual(receiver.received[3]?.json.data.object, {
        ...(receiver.received[3]?.json.data.object as object),
        status: 'closed',
      });
    });

    test('compacted: a record created and changed before its event left is sent once, created, in its latest state', async () => {
      const target = receiver;
      // The scenario needs both imports committed before the first event leaves again: on a machine
      // so busy that the held attempt timed out and its retry (5 s later) was sent before they were
      // in, that retry read the feed between them, and the scenario is played again with new records,
      // from a new endpoint.
      for (let round = 1; ; round += 1) {
        // The receiver holds the first event until both imports are in.
        let release: () => void = () => {};
        const held = new Promise<void>((resolve) => {
          release = resolve;
        });
        target.answer = (_r, response) => {
          void held.then(() => {
            response.statusCode = 204;
            response.end();
          });
        };
        const { endpoint } = await create();
        const [first, second] = [randomUUID(), randomUUID()];
        const ours = () =>
          target.received.filter((r) => r.json.data.id === first || r.json.data.id === second);
        await importRecords(ctx, [incident(accountId, first, 1)]);
        await until(() => ours().length >= 1, 20_000, 'the first event');
        await importRecords(ctx, [incident(accountId, second, 2)]);
        await importRecords(ctx, [incident(accountId, second, 2, { status: 'investigating' })]);
        // Only the first event's attempt has reached the receiver: no retry read the feed meanwhile.
        const retriedMeanwhile = ours().length > 1;
        release();
        if (retriedMeanwhile) {
          assert.ok(round < 5, `a retry was sent before both imports were in, ${round} times`);
          await ctx.runtime.services.webhooks.delete(endpoint.id, 'test');
          continue;
        }
        // Events, not attempts: on a slow machine the held attempt may time out and be sent again,
        // with the same webhook-id (at least once), and that retry is not the second event.
        const eventIds = () => new Set(ours().map((r) => r.headers['webhook-id']));
        await until(() => eventIds().size >= 2, 20_000, 'the second event');
        await sleep(300);
        const events = new Map(ours().map((r) => [r.headers['webhook-id'], r]));
        assert.deepEqual(
          [...events.values()].map((r) => [
            r.json.type,
            r.json.data.id,
            (r.json.data.object as { status: string }).status,
          ]),
          [
            ['incident.created', first, 'open'],
            ['incident.created', second, 'investigating'],
          ],
        );
        return;
      }
    });

    test('a 500 then a 200: retried after about 5 s with the same webhook-id, and later events waited (no gap, in order)', async () => {
      let answers = [500];
      receiver.answer = (_r, response) => {
        response.statusCode = answers.shift() ?? 200;
        response.end();
      };
      const { endpoint } = await create();
      const ids = [randomUUID(), randomUUID(), randomUUID()];
      await importRecords(
        ctx,
        ids.map((id, i) => incident(accountId, id, i + 1)),
      );
      await until(
        async () => (await ctx.runtime.services.webhooks.show(endpoint.id)).last_status !== null,
        5000,
        'the attempt',
      );
      const failing = await ctx.runtime.services.webhooks.show(endpoint.id);
      assert.equal(failing.last_status, 500);
      assert.notEqual(failing.failing_since, null);
      // Counted from the attempt's end: its start plus its duration, as the delivery log has them.
      const ended = Date.parse(failing.last_attempt_at ?? '') + (failing.attempts[0]?.duration_ms ?? 0);
      const wait = Date.parse(failing.next_attempt_at ?? '') - ended;
      assert.ok(wait >= 4000 && wait <= 6000, `first retry ${wait} ms after the attempt's end`);
      assert.equal(receiver.received.length, 1, 'later events wait');
      await receiver.waitFor(4, 10_000);
      await until(
        async () => (await ctx.runtime.services.webhooks.show(endpoint.id)).lag === 0,
        5000,
        'caught up',
      );
      const [failed, retried, ...rest] = receiver.received;
      assert.equal(retried?.headers['webhook-id'], failed?.headers['webhook-id']);
      assert.equal(retried?.json.data.id, ids[0]);
      assert.deepEqual(
        rest.map((r) => r.json.data.id),
        ids.slice(1),
      );
      const recovered = await ctx.runtime.services.webhooks.show(endpoint.id);
      assert.equal(recovered.failing_since, null);
      assert.deepEqual(
        recovered.attempts.slice(0, 4).map((a) => a.status),
        [200, 200, 200, 500],
      );
      answers = [];
    });

    test('a 429 or 503 with Retry-After: the retry waits what it asks (seconds or a date), at most an hour past the schedule, and the log says so', async () => {
      // Each case: the answer, then the bounds of the wait before the retry (from the attempt's end).
      const cases: { status: number; retryAfter: () => string; min: number; max: number }[] = [
        { status: 429, retryAfter: () => '12', min: 12_000, max: 12_000 },
        // An HTTP date has whole seconds: up to one less than asked.
        {
          status: 503,
          retryAfter: () => new Date(Date.now() + 40_000).toUTCString(),
          min: 38_000,
          max: 40_000,
        },
        // A day asked: an hour past the schedule (5 s, jittered by a fifth) at most.
        { status: 429, retryAfter: () => '86400', min: 3_604_000, max: 3_606_000 },
        // Less than the schedule asked: the schedule.
        { status: 503, retryAfter: () => '1', min: 4000, max: 6000 },
        // Not a 429 or a 503: not heeded.
        { status: 500, retryAfter: () => '60', min: 4000, max: 6000 },
      ];
      for (const [i, { status, retryAfter, min, max }] of cases.entries()) {
        receiver.answer = (_r, response) => {
          response.statusCode = status;
          response.setHeader('retry-after', retryAfter());
          response.end();
        };
        // An endpoint per case (one URL and filter is one endpoint of an account).
        const { endpoint } = await create(undefined, `/hook-${i}`);
        await importRecords(ctx, [incident(accountId, randomUUID(), 1)]);
        await until(
          async () => (await ctx.runtime.services.webhooks.show(endpoint.id)).next_attempt_at !== null,
          5000,
          `the attempt answered ${status}`,
        );
        const shown = await ctx.runtime.services.webhooks.show(endpoint.id);
        const [attempt] = shown.attempts;
        const ended = Date.parse(shown.last_attempt_at ?? '') + (attempt?.duration_ms ?? 0);
        const wait = Date.parse(shown.next_attempt_at ?? '') - ended;
        assert.ok(wait >= min && wait <= max, `${status}, Retry-After ${retryAfter()}: waits ${wait} ms`);
        if (status !== 500)
          assert.match(attempt?.error ?? '', new RegExp(`^HTTP ${status} \\(Retry-After: \\d+ s\\)`));
        else assert.doesNotMatch(attempt?.error ?? '', /Retry-After/);
        await ctx.runtime.services.webhooks.disable(endpoint.id, 'test');
      }
    });

    test('a receiver slower than the timeout: the attempt fails as a timeout and waits for its retry', async () => {
      receiver.answer = (_r, response) => {
        setTimeout(() => response.end(), 4000).unref();
      };
      const { endpoint } = await create();
      await importRecords(ctx, [incident(accountId, randomUUID(), 1)]);
      await until(
        async () => (await ctx.runtime.services.webhooks.show(endpoint.id)).attempts.length > 0,
        5000,
        'an attempt',
      );
      const [attempt] = (await ctx.runtime.services.webhooks.show(endpoint.id)).attempts;
      assert.equal(attempt?.status, null);
      assert.equal(attempt?.error, 'no answer within 2000 ms');
      const shown = await ctx.runtime.services.webhooks.show(endpoint.id);
      assert.equal(shown.position, endpoint.position, 'the position waits for a 2xx');
      assert.equal(shown.lag, 1);
      assert.notEqual(shown.next_attempt_at, null);
    });

    test("a retry after a timeout is scheduled about 5 s after the attempt's end, not its start", async () => {
      // Answers only after the timeout (2 s here): the attempt ends when the timeout does.
      receiver.answer = (_r, response) => {
        setTimeout(() => response.end(), 4000).unref();
      };
      const { endpoint } = await create();
      await importRecords(ctx, [incident(accountId, randomUUID(), 1)]);
      await until(
        async () => (await ctx.runtime.services.webhooks.show(endpoint.id)).next_attempt_at !== null,
        5000,
        'the retry scheduled',
      );
      const shown = await ctx.runtime.services.webhooks.show(endpoint.id);
      const [attempt] = shown.attempts;
      assert.equal(attempt?.error, 'no answer within 2000 ms');
      assert.ok((attempt?.duration_ms ?? 0) >= 2000, `the attempt lasted ${attempt?.duration_ms} ms`);
      const ended = Date.parse(attempt?.at ?? '') + (attempt?.duration_ms ?? 0);
      const wait = Date.parse(shown.next_attempt_at ?? '') - ended;
      assert.ok(wait >= 4000 && wait <= 6000, `retry ${wait} ms after the attempt's end`);
    });

    test('410 Gone disables the endpoint at once, with the reason and an audit event; nothing more is sent', async () => {
      receiver.answer = (_r, response) => {
        response.statusCode = 410;
        response.end();
      };
      const { endpoint } = await create();
      await importRecords(ctx, [incident(accountId, randomUUID(), 1), incident(accountId, randomUUID(), 2)]);
      await until(
        async () => (await ctx.runtime.services.webhooks.show(endpoint.id)).state === 'disabled',
        5000,
        'disabled',
      );
      const shown = await ctx.runtime.services.webhooks.show(endpoint.id);
      assert.match(shown.disabled_reason ?? '', /^the receiver answered 410 Gone/);
      const audit = await auditRepository.list(ctx.db, accountId, 10, {
        type: 'webhook_endpoint',
        id: endpoint.id,
      });
      assert.deepEqual(
        audit.map((e) => [e.actor, e.action]),
        [
          ['system', 'disabled'],
          ['test', 'created'],
        ],
      );
      await sleep(500);
      assert.equal(receiver.received.length, 1);
    });

    test('a redirect is not followed: a failed attempt, the target never asked', async () => {
      const target = await Receiver.start();
      receiver.answer = (_r, response) => {
        response.writeHead(307, { location: target.url() });
        response.end();
      };
      const { endpoint } = await create();
      await importRecords(ctx, [incident(accountId, randomUUID(), 1)]);
      await until(
        async () => (await ctx.runtime.services.webhooks.show(endpoint.id)).attempts.length > 0,
        5000,
        'an attempt',
      );
      const [attempt] = (await ctx.runtime.services.webhooks.show(endpoint.id)).attempts;
      assert.equal(attempt?.status, 307);
      assert.equal(target.connections, 0);
      await target.close();
    });

    test('rotation: both signatures verify during the overlap, only the new one after it', async (t) => {
      // The process's clock is held and moved past the overlap, however long delivering takes.
      t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
      const { endpoint, secret: old } = await create();
      const { secret: next } = await ctx.runtime.services.webhooks.rotateSecret(endpoint.id, 'test', {
        overlapHours: 1,
      });
      await importRecords(ctx, [incident(accountId, randomUUID(), 1)]);
      await receiver.waitFor(1);
      const during = receiver.received[0] as Received;
      assert.equal(String(during.headers['webhook-signature']).split(' ').length, 2);
      assert.ok(verify(old, during));
      assert.ok(verify(next, during));
      t.mock.timers.tick(3_600_000);
      await importRecords(ctx, [incident(accountId, randomUUID(), 2)]);
      await receiver.waitFor(2);
      const afterOverlap = receiver.received[1] as Received;
      assert.equal(String(afterOverlap.headers['webhook-signature']).split(' ').length, 1);
      assert.ok(verify(next, afterOverlap));
      assert.throws(() => verify(old, afterOverlap));
    });

    test('two rotations inside the overlap: the first, second and current secrets all sign; each previous one stops at its own expiry', async (t) => {
      t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
      const signatures = (received: Received) => String(received.headers['webhook-signature']).split(' ');
      const { endpoint, secret: first } = await create();
      // The first secret signs until 2 h from now, the second until 2 h 30 min from now.
      const { secret: second } = await ctx.runtime.services.webhooks.rotateSecret(endpoint.id, 'test', {
        overlapHours: 2,
      });
      t.mock.timers.tick(30 * 60_000);
      const { secret: current, previous_secrets_expire_at } =
        await ctx.runtime.services.webhooks.rotateSecret(endpoint.id, 'test', { overlapHours: 2 });

      await importRecords(ctx, [incident(accountId, randomUUID(), 1)]);
      await receiver.waitFor(1);
      const during = receiver.received[0] as Received;
      for (const secret of [first, second, current]) assert.ok(verify(secret, during));
      assert.equal(signatures(during).length, 3);
      assert.equal(previous_secrets_expire_at.length, 2);
      assert.deepEqual(
        (await ctx.runtime.services.webhooks.show(endpoint.id)).previous_secrets_expire_at,
        previous_secrets_expire_at,
      );

      // 2 h after the first rotation: the first secret's overlap is over, the second's is not.
      t.mock.timers.tick(90 * 60_000);
      await importRecords(ctx, [incident(accountId, randomUUID(), 2)]);
      await receiver.waitFor(2);
      const afterFirst = receiver.received[1] as Received;
      assert.equal(signatures(afterFirst).length, 2);
      assert.ok(verify(second, afterFirst));
      assert.ok(verify(current, afterFirst));
      assert.throws(() => verify(first, afterFirst));

      // And 30 min later the second's too: only the current secret signs.
      t.mock.timers.tick(30 * 60_000);
      await importRecords(ctx, [incident(accountId, randomUUID(), 3)]);
      await receiver.waitFor(3);
      const afterBoth = receiver.received[2] as Received;
      assert.equal(signatures(afterBoth).length, 1);
      assert.ok(verify(current, afterBoth));
      assert.throws(() => verify(second, afterBoth));
      assert.deepEqual(
        (await ctx.runtime.services.webhooks.show(endpoint.id)).previous_secrets_expire_at,
        [],
      );
    });

    test("account A's endpoint never sees account B's changes", async () => {
      await create();
      const other = await seedAccount(ctx.db);
      const otherReceiver = await Receiver.start();
      await ctx.runtime.services.webhooks.create({
        accountId: other,
        url: otherReceiver.url(),
        actor: 'test',
      });
      const mine = randomUUID();
      const theirs = Array.from({ length: 20 }, () => randomUUID());
      await importRecords(
        ctx,
        theirs.map((id, i) => incident(other, id, i + 1)),
      );
      await importRecords(ctx, [incident(accountId, mine, 1)]);
      await receiver.waitFor(1);
      await otherReceiver.waitFor(20);
      await sleep(300);
      assert.deepEqual(
        receiver.received.map((r) => r.json.data.id),
        [mine],
      );
      assert.deepEqual(new Set(otherReceiver.received.map((r) => r.json.data.id)), new Set(theirs));
      await otherReceiver.close();
    });

    test('the event filter: only the types asked for are sent, and the position moves past the others', async () => {
      const { endpoint } = await create('incident.updated, department.*');
      const id = randomUUID();
      await importRecords(ctx, [incident(accountId, id, 1)]);
      // Past the creation before the update is made: both in the feed at once would be compacted
      // into one incident.created, which the filter leaves out.
      await until(
        async () => (await ctx.runtime.services.webhooks.show(endpoint.id)).lag === 0,
        10_000,
        'past the creation',
      );
      await importRecords(ctx, [incident(accountId, id, 1, { status: 'closed' })]);
      await receiver.waitFor(1);
      await sleep(300);
      assert.deepEqual(
        receiver.received.map((r) => r.json.type),
        ['incident.updated'],
      );
      assert.equal((await ctx.runtime.services.webhooks.show(endpoint.id)).lag, 0);
    });

    test('without api_access nothing is delivered; once it is back, the waiting changes are', async () => {
      const { endpoint } = await create();
      await importRecords(ctx, [
        { type: 'account', id: accountId, name: 'Paused', api_access: false, rate_limit_per_hour: 1000 },
      ]);
      const id = randomUUID();
      await importRecords(ctx, [incident(accountId, id, 1)]);
      await sleep(800);
      assert.equal(receiver.received.length, 0);
      await assert.rejects(
        ctx.runtime.services.webhooks.create({ accountId, url: receiver.url(), actor: 'test' }),
        /does not include API access/,
      );
      // Nor is a test event sent.
      await assert.rejects(
        ctx.runtime.services.webhooks.sendTest(endpoint.id),
        /does not include API access/,
      );
      assert.equal(receiver.received.length, 0);
      await importRecords(ctx, [
        { type: 'account', id: accountId, name: 'Paused', api_access: true, rate_limit_per_hour: 1000 },
      ]);
      await receiver.waitFor(1);
      assert.equal(receiver.received[0]?.json.data.id, id);
    });

    test('a test event is sent at once, signed, typed webhook.test, and logged', async () => {
      const { endpoint, secret } = await create();
      const result = await ctx.runtime.services.webhooks.sendTest(endpoint.id);
      assert.equal(result.status, 204);
      const [received] = receiver.received;
      assert.ok(received !== undefined);
      assert.deepEqual(verify(secret, received), received.json);
      assert.equal(received.json.type, 'webhook.test');
      assert.equal(received.json.data.id, endpoint.id);
      assert.equal(received.headers['webhook-id'], result.webhook_id);
      const [attempt] = (await ctx.runtime.services.webhooks.show(endpoint.id)).attempts;
      assert.deepEqual(
        [attempt?.type, attempt?.status, attempt?.webhook_id],
        ['webhook.test', 204, result.webhook_id],
      );
    });

    test('resend from a cursor sends the changes after it again, with the same webhook-ids', async () => {
      const { endpoint } = await create();
      const ids = [randomUUID(), randomUUID(), randomUUID()];
      await importRecords(
        ctx,
        ids.map((id, i) => incident(accountId, id, i + 1)),
      );
      await receiver.waitFor(3);
      const cursor = receiver.received[0]?.json.data.cursor as string;
      await ctx.runtime.services.webhooks.resend(endpoint.id, cursor, 'test');
      await receiver.waitFor(5);
      await sleep(300);
      assert.equal(receiver.received.length, 5);
      assert.deepEqual(
        receiver.received.slice(3).map((r) => r.headers['webhook-id']),
        receiver.received.slice(1, 3).map((r) => r.headers['webhook-id']),
      );
    });

    test('a resend while an attempt is in flight wins over that attempt, even once this instance claims the endpoint again', async () => {
      const { endpoint } = await create();
      let release: () => void = () => {};
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      receiver.answer = (request, response) => {
        // The third event's first attempt waits until the resend is made and claimed.
        const wait =
          receiver.received.at(-1) === request && receiver.received.length === 3 ? held : Promise.resolve();
        void wait.then(() => {
          response.statusCode = 204;
          response.end();
        });
      };
      const ids = [randomUUID(), randomUUID(), randomUUID()];
      await importRecords(
        ctx,
        ids.map((id, i) => incident(accountId, id, i + 1)),
      );
      await receiver.waitFor(3);
      const cursor = receiver.received[0]?.json.data.cursor as string;
      await ctx.runtime.services.webhooks.resend(endpoint.id, cursor, 'test');
      // This instance takes the released endpoint again while the old attempt is still out.
      await until(
        async () =>
          (
            await ctx.db
              .selectFrom('webhook_endpoints')
              .select('lease_owner')
              .where('id', '=', endpoint.id)
              .executeTakeFirstOrThrow()
          ).lease_owner !== null,
        5000,
        'claimed again',
      );
      release();
      await receiver.waitFor(5);
      await sleep(300);
      assert.deepEqual(
        receiver.received.map((r) => r.json.data.id),
        [ids[0], ids[1], ids[2], ids[1], ids[2]],
      );
      assert.equal(
        (await ctx.runtime.services.webhooks.show(endpoint.id)).position,
        receiver.received[2]?.json.data.seq,
      );
    });

    test('failing longer than WEBHOOK_DISABLE_AFTER_HOURS disables the endpoint with the reason', async () => {
      const short = await createTestContext(store, {
        ...ENV,
        WEBHOOK_DISABLE_AFTER_HOURS: (2 / 3600).toFixed(6),
      });
      try {
        await short.runtime.delivery.start();
        const account = await seedAccount(short.db);
        receiver.answer = (_r, response) => {
          response.statusCode = 503;
          response.end('down for maintenance');
        };
        const { endpoint } = await short.runtime.services.webhooks.create({
          accountId: account,
          url: receiver.url(),
          actor: 'test',
        });
        await importRecords(short, [incident(account, randomUUID(), 1)]);
        await until(
          async () => (await short.runtime.services.webhooks.show(endpoint.id)).state === 'disabled',
          12_000,
          'disabled',
        );
        const shown = await short.runtime.services.webhooks.show(endpoint.id);
        assert.match(
          shown.disabled_reason ?? '',
          /^failing since .*\(last: HTTP 503: down for maintenance\)$/,
        );
        assert.equal(receiver.received.length, 2, 'the first attempt and its retry');
      } finally {
        await short.close();
      }
    });

    test('past retention: the loop disables the endpoint and says why; enable is refused until resend --cursor latest', async () => {
      const { endpoint } = await create();
      // The feed purged deletions past the endpoint's position, as CHANGES_RETENTION_DAYS would.
      await ctx.db
        .updateTable('accounts')
        .set({ changes_purged_seq: 10_000, data_version: 10_001 })
        .where('id', '=', accountId)
        .execute();
      // Any change wakes the deliveries.
      await importRecords(ctx, [incident(accountId, randomUUID(), 1)]);
      await until(
        async () => (await ctx.runtime.services.webhooks.show(endpoint.id)).state === 'disabled',
        5000,
        'disabled',
      );
      const stopped = await ctx.runtime.services.webhooks.show(endpoint.id);
      assert.equal(stopped.past_retention, true);
      assert.match(stopped.disabled_reason ?? '', /older than the changes feed keeps/);
      assert.equal(
        receiver.received.length,
        0,
        'nothing sent from a position that may have missed deletions',
      );
      await assert.rejects(
        ctx.runtime.services.webhooks.enable(endpoint.id, 'test'),
        /webhooks resend .* --cursor latest/,
      );
      await ctx.runtime.services.webhooks.resend(endpoint.id, 'latest', 'test');
      const enabled = await ctx.runtime.services.webhooks.enable(endpoint.id, 'test');
      assert.equal(enabled.state, 'active');
      assert.equal(enabled.position, 10_002);
      assert.equal(enabled.past_retention, false);
    });

    test('caught up, an endpoint costs no write: its lease is renewed every third of WEBHOOK_LEASE_SECONDS, not at each commit', async () => {
      const { endpoint } = await create();
      await importRecords(ctx, [incident(accountId, randomUUID(), 1)]);
      await receiver.waitFor(1);
      await until(
        async () => (await ctx.runtime.services.webhooks.show(endpoint.id)).lag === 0,
        5000,
        'caught up',
      );
      const leaseExpiry = async () =>
        (
          await ctx.db
            .selectFrom('webhook_endpoints')
            .select('lease_expires_at')
            .where('id', '=', endpoint.id)
            .executeTakeFirstOrThrow()
        ).lease_expires_at;
      // Leases are renewed by the timer every 4 s / 3, or by a tick that another commit caused
      // once half of that has passed (other endpoints of this instance still retry meanwhile):
      // renewals are at least 0.67 s apart, so at most two fall in 1.2 s (at every commit, 13 did).
      const seen = new Set<string | null>();
      const end = Date.now() + 1200;
      while (Date.now() < end) {
        seen.add(await leaseExpiry());
        await sleep(25);
      }
      assert.ok(seen.size <= 3, `the lease was written ${seen.size - 1} times in 1.2 s`);
      assert.ok(!seen.has(null), 'still held');
    });

    test('/metrics counts attempts by outcome and shows the lag and the latency histogram', async () => {
      const { endpoint } = await create();
      await importRecords(ctx, [incident(accountId, randomUUID(), 1)]);
      await receiver.waitFor(1);
      await until(
        async () => (await ctx.runtime.services.webhooks.show(endpoint.id)).lag === 0,
        5000,
        'caught up',
      );
      const text = (await ctx.app.inject({ url: '/metrics' })).body;
      assert.match(text, /webhook_delivery_attempts_total\{outcome="success"\} [1-9]/);
      assert.match(text, /webhook_delivery_latency_seconds_count [1-9]/);
      assert.match(text, new RegExp(`webhook_endpoint_lag_events\\{endpoint="${endpoint.id}"\\} 0`));
      assert.match(
        text,
        new RegExp(`webhook_endpoint_oldest_undelivered_seconds\\{endpoint="${endpoint.id}"\\} 0`),
      );
    });
  });

  describe(`webhook delivery when the store fails the worker (${store})`, () => {
    let ctx: TestContext;
    let receiver: Receiver;
    let dispatcher: WebhookDispatcher;
    const faults = new FailingPositionWrites();
    let errors: string[] = [];

    // The app's own dispatcher stays stopped: each test runs one that delivers through a store that fails.
    before(async () => {
      ctx = await createTestContext(store, ENV);
    });
    after(() => ctx.close());
    beforeEach(async () => {
      receiver = await Receiver.start();
      errors = [];
    });
    afterEach(async () => {
      await receiver.close();
      await dispatcher.stop();
      await ctx.db.deleteFrom('webhook_endpoints').execute();
    });

    async function startDispatcher(leaseSeconds: number): Promise<void> {
      const { config, runtime } = ctx;
      const db = ctx.db.withPlugin(faults);
      // Every read and write of the deliveries meets the faults, those made through the services too.
      const services = buildServices({ ...runtime.database, db }, config, runtime.outbound);
      dispatcher = testDispatcher(ctx, {
        db,
        feed: services.changeFeed,
        secrets: services.webhooks,
        leaseSeconds,
        logger: { info() {}, warn() {}, error: (_details, message) => errors.push(message) },
      });
      await dispatcher.start();
    }

    async function createEndpoint(): Promise<string> {
      const accountId = await seedAccount(ctx.db);
      await ctx.runtime.services.webhooks.create({
        accountId,
        url: receiver.url(),
        actor: 'test',
      });
      return accountId;
    }

    async function endpointOf(accountId: string): Promise<string> {
      const row = await ctx.db
        .selectFrom('webhook_endpoints')
        .select('id')
        .where('account_id', '=', accountId)
        .executeTakeFirstOrThrow();
      return row.id;
    }

    async function importChanges(accountId: string, count: number): Promise<string[]> {
      const ids = Array.from({ length: count }, () => randomUUID());
      await importRecords(
        ctx,
        ids.map((id, i) => incident(accountId, id, i + 1)),
      );
      return ids;
    }

    const distinctReceived = () => new Set(receiver.received.map((r) => r.json.data.id)).size;

    /** Every change arrived, the first arrivals in feed order (repeats are allowed: at least once). */
    function assertAllInOrder(ids: string[]): void {
      const firsts: number[] = [];
      const seen = new Set<string>();
      for (const received of receiver.received) {
        if (seen.has(received.json.data.id)) continue;
        seen.add(received.json.data.id);
        firsts.push(received.json.data.seq ?? 0);
      }
      assert.deepEqual(seen, new Set(ids));
      assert.deepEqual(
        firsts,
        [...firsts].sort((a, b) => a - b),
      );
    }

    test('a write the store fails is tried again by the same worker, well within its lease: every change arrives, in order, once', async () => {
      // A 120-second lease: a worker that gave up would leave the endpoint for 120 s, twice the
      // generous wait below for all 300 (a busy machine once took longer than 10 s to send them).
      await startDispatcher(120);
      const accountId = await createEndpoint();
      const endpointId = await endpointOf(accountId);
      await until(() => dispatcher.held === 1, 5000, 'the endpoint held');
      faults.failNext(3, () => new StoreUnavailableError('the pool queue is full'));
      const ids = await importChanges(accountId, 300);
      await until(() => distinctReceived() === 300, 60_000, 'all 300');
      assert.equal(faults.failed, 3, 'three position writes failed');
      assertAllInOrder(ids);
      // What was accepted before a failed write is written at the next try, not sent again.
      await until(
        async () => (await ctx.runtime.services.webhooks.show(endpointId)).lag === 0,
        5000,
        'caught up',
      );
      assert.equal(receiver.received.length, 300, 'nothing sent twice');
      assert.equal(dispatcher.held, 1, 'the worker carried on');
      assert.deepEqual(errors, [], 'an unavailable store is not an error to log');
    });

    test('a worker that ends on an unexpected error stops renewing its lease, and its endpoint is taken again', async () => {
      // Two endpoints: the other one's worker keeps the renewals going.
      await startDispatcher(4);
      const accountId = await createEndpoint();
      await createEndpoint();
      await until(() => dispatcher.held === 2, 5000, 'both endpoints held');
      faults.failNext(1, () => new Error('an unexpected failure'));
      const ids = await importChanges(accountId, 50);
      await until(() => errors.length === 1, 5000, 'the failure logged');
      assert.deepEqual(errors, ['webhook delivery loop failed']);
      assert.equal(dispatcher.held, 1, 'the worker ended');
      // Its position was never written: once its lease (4 s) has run out, a new worker takes the
      // endpoint and sends the same events again, with the same webhook-ids. (A busy machine may
      // have sent fewer than 50 before the first write failed: those are compared.)
      const firstIds = receiver.received.map((r) => String(r.headers['webhook-id']));
      await until(() => receiver.received.length >= firstIds.length + 50, 15_000, 'the events sent again');
      assert.equal(dispatcher.held, 2);
      assertAllInOrder(ids);
      const compared = Math.min(50, firstIds.length);
      assert.ok(compared > 0, 'events were sent before the failure');
      assert.deepEqual(
        receiver.received
          .slice(firstIds.length, firstIds.length + compared)
          .map((r) => String(r.headers['webhook-id'])),
        firstIds.slice(0, compared),
      );
    });
  });
}
