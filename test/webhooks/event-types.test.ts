import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import type {
  KyselyPlugin,
  PluginTransformQueryArgs,
  PluginTransformResultArgs,
  QueryResult,
  RootOperationNode,
  UnknownRow,
} from 'kysely';
import { buildServices } from '../../src/services/services.ts';
import { WebhookDispatcher } from '../../src/webhooks/delivery.ts';
import { createTestContext, STORES, seedAccount, type TestContext } from '../helpers.ts';
import { testDispatcher } from './dispatcher.ts';
import { importRecords, incident } from './feed.ts';
import { type Received, Receiver } from './receiver.ts';
import { until } from '../wait.ts';

/**
 * `created` or `updated` under delivery lag (issue 36 item 1; docs/webhooks.md, "Events"): a
 * record's change is `updated` only if this endpoint was sent the record since it last entered the
 * view, however far other records' deliveries have moved the position meanwhile. A slow receiver
 * holds an answer while changes are made, so that the next read of the feed holds them all; the
 * tests assert the exact sequence of events the receiver saw, and what the endpoint remembers.
 */

const ENV = {
  WEBHOOKS_ALLOW_PRIVATE: 'true',
  // The longest allowed: a held answer waits for imports, which take seconds on a busy machine, and
  // must not time out (its retry would be sent again).
  WEBHOOK_TIMEOUT_MS: '60000',
  WEBHOOK_LEASE_SECONDS: '120',
};

/** Incidents named by a letter, so that sequences read as names; each name is one record. */
class Incidents {
  private readonly ids = new Map<string, string>();
  private readonly names = new Map<string, string>();
  private readonly numbers = new Map<string, number>();

  private readonly accountId: string;

  constructor(accountId: string) {
    this.accountId = accountId;
  }

  id(name: string): string {
    let id = this.ids.get(name);
    if (id === undefined) {
      id = randomUUID();
      this.ids.set(name, id);
      this.names.set(id, name);
      this.numbers.set(name, this.numbers.size + 1);
    }
    return id;
  }

  nameOf(id: string): string {
    return this.names.get(id) ?? id;
  }

  /** An import record that creates (or brings back) the incident, or changes it to `status`. */
  upsert(name: string, status = 'open') {
    const id = this.id(name);
    return incident(this.accountId, id, this.numbers.get(name) ?? 0, { status });
  }

  delete(name: string) {
    return { type: 'incident', id: this.id(name), account_id: this.accountId, deleted: true };
  }
}

/**
 * Answers 204 at once, except the next request about a record named by `hold`: that one waits
 * until `release(status)`, and the worker waits on it meanwhile.
 */
class SlowReceiver {
  private readonly held: { id: string; arrived: () => void; answer: Promise<number> }[] = [];

  constructor(receiver: Receiver) {
    receiver.answer = (received, response) => {
      const i = this.held.findIndex((hold) => hold.id === received.json.data.id);
      const [hold] = i < 0 ? [] : this.held.splice(i, 1);
      if (hold === undefined) {
        response.statusCode = 204;
        response.end();
        return;
      }
      hold.arrived();
      void hold.answer.then((status) => {
        response.statusCode = status;
        response.end();
      });
    };
  }

  hold(id: string): { arrived: Promise<void>; release: (status?: number) => void } {
    let arrived: () => void = () => {};
    let release: (status: number) => void = () => {};
    const answer = new Promise<number>((resolve) => {
      release = resolve;
    });
    const hasArrived = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    this.held.push({ id, arrived, answer });
    return { arrived: hasArrived, release: (status = 204) => release(status) };
  }
}

/** Records the kind of every statement that names `webhook_acknowledged`. */
class AcknowledgedStatements implements KyselyPlugin {
  readonly kinds: string[] = [];

  transformQuery({ node }: PluginTransformQueryArgs): RootOperationNode {
    if (JSON.stringify(node).includes('"webhook_acknowledged"')) this.kinds.push(node.kind);
    return node;
  }

  async transformResult({ result }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return result;
  }
}

for (const store of STORES) {
  describe(`webhook event types from what the endpoint was sent (${store})`, () => {
    let ctx: TestContext;
    let receiver: Receiver;
    let slow: SlowReceiver;
    let dispatcher: WebhookDispatcher | null = null;
    let accountId: string;
    let records: Incidents;

    // The app's own dispatcher stays stopped: each test runs one, some with a smaller batch.
    before(async () => {
      ctx = await createTestContext(store, ENV);
    });
    after(() => ctx.close());
    beforeEach(async () => {
      receiver = await Receiver.start();
      slow = new SlowReceiver(receiver);
      accountId = await seedAccount(ctx.db);
      records = new Incidents(accountId);
    });
    afterEach(async () => {
      await dispatcher?.stop();
      dispatcher = null;
      await receiver.close();
      await ctx.db.deleteFrom('webhook_endpoints').execute();
    });

    async function startDispatcher(batchSize?: number, db = ctx.db): Promise<void> {
      const { config, runtime } = ctx;
      const services = buildServices({ ...runtime.database, db }, config, runtime.outbound);
      dispatcher = testDispatcher(ctx, {
        db,
        feed: services.changeFeed,
        secrets: services.webhooks,
        ...(batchSize === undefined ? {} : { batchSize }),
      });
      await dispatcher.start();
    }

    const create = async (events?: string) =>
      (
        await ctx.runtime.services.webhooks.create({
          accountId,
          url: receiver.url(),
          events,
          actor: 'test',
        })
      ).endpoint;

    const seen = (received: Received[] = receiver.received) =>
      received.map((r) => [r.json.type, records.nameOf(r.json.data.id)]);

    /** Once `count` requests arrived and the endpoint caught up: nothing more is on its way. */
    async function settled(endpointId: string, count: number, timeoutMs = 30_000): Promise<void> {
      await receiver.waitFor(count, timeoutMs);
      await until(
        async () => (await ctx.runtime.services.webhooks.show(endpointId)).lag === 0,
        timeoutMs,
        'caught up',
      );
      assert.equal(receiver.received.length, count, `${JSON.stringify(seen())}`);
    }

    /** What the endpoint remembers: its floor, its position, the records it acknowledged past the floor. */
    async function knowledge(endpointId: string) {
      const row = await ctx.db
        .selectFrom('webhook_endpoints')
        .select(['known_through', 'position'])
        .where('id', '=', endpointId)
        .executeTakeFirstOrThrow();
      const acknowledged = await ctx.db
        .selectFrom('webhook_acknowledged')
        .select(['record_type', 'record_id', 'created_seq'])
        .where('endpoint_id', '=', endpointId)
        .execute();
      return {
        ...row,
        acknowledged: acknowledged.map((r) => `${r.record_type} ${records.nameOf(r.record_id)}`).sort(),
        createdSeqs: new Map(acknowledged.map((r) => [records.nameOf(r.record_id), r.created_seq])),
      };
    }

    /** The seq of the event the receiver got about `name` (its latest one). */
    const seqOf = (name: string) =>
      receiver.received.findLast((r) => r.json.data.id === records.id(name))?.json.data.seq ?? -1;

    test('a record created, then changed after other records were, while the receiver was slow: one created, never an updated it was not sent', async () => {
      const endpoint = await create();
      await startDispatcher();
      const a = slow.hold(records.id('A'));
      await importRecords(ctx, [records.upsert('A')]);
      await a.arrived;
      // In separate commits, B between them: B's delivery moves the position past X's entry.
      await importRecords(ctx, [records.upsert('X')]);
      await importRecords(ctx, [records.upsert('B')]);
      await importRecords(ctx, [records.upsert('X', 'closed')]);
      a.release();
      await settled(endpoint.id, 3);
      assert.deepEqual(seen(), [
        ['incident.created', 'A'],
        ['incident.created', 'B'],
        ['incident.created', 'X'],
      ]);
      assert.equal((receiver.received[2]?.json.data.object as { status: string }).status, 'closed');
      // Steady state: whole reads move the floor to the position, and nothing is kept per record.
      const after = await knowledge(endpoint.id);
      assert.equal(after.known_through, after.position);
      assert.deepEqual(after.acknowledged, []);
    });

    test('in steady state (reads delivered whole) the acknowledged records cost no statement: one look and one delete per worker, none per batch', async () => {
      const endpoint = await create();
      const statements = new AcknowledgedStatements();
      await startDispatcher(undefined, ctx.db.withPlugin(statements));
      for (const [i, name] of ['A', 'B', 'C'].entries()) {
        await importRecords(ctx, [records.upsert(name)]);
        await settled(endpoint.id, i + 1);
      }
      await importRecords(ctx, [records.upsert('A', 'closed'), records.upsert('D')]);
      await settled(endpoint.id, 5);
      assert.deepEqual(seen().at(-2), ['incident.updated', 'A']);
      assert.deepEqual(statements.kinds, ['SelectQueryNode', 'DeleteQueryNode']);
    });

    test('a read cut at the batch size does not move the floor: a record further on in the feed is still created', async () => {
      const endpoint = await create();
      await startDispatcher(3);
      const a = slow.hold(records.id('A'));
      await importRecords(ctx, [records.upsert('A')]);
      await a.arrived;
      await importRecords(ctx, [
        records.upsert('X'),
        records.upsert('B'),
        records.upsert('C'),
        records.upsert('D'),
      ]);
      await importRecords(ctx, [records.upsert('X', 'closed')]);
      // The read after A is B, C, D (three, the batch size): X's only change lies beyond it.
      const x = slow.hold(records.id('X'));
      a.release();
      await x.arrived;
      const during = await knowledge(endpoint.id);
      assert.equal(during.known_through, seqOf('A'), 'the floor stayed after the cut read');
      assert.deepEqual(during.acknowledged, ['incident B', 'incident C', 'incident D']);
      x.release();
      await settled(endpoint.id, 5);
      await importRecords(ctx, [records.upsert('B', 'closed')]);
      await settled(endpoint.id, 6);
      assert.deepEqual(seen(), [
        ['incident.created', 'A'],
        ['incident.created', 'B'],
        ['incident.created', 'C'],
        ['incident.created', 'D'],
        ['incident.created', 'X'],
        ['incident.updated', 'B'],
      ]);
      const after = await knowledge(endpoint.id);
      assert.equal(after.known_through, after.position);
      assert.deepEqual(after.acknowledged, []);
    });

    test('a failure in the middle of a batch, then its retry: what was accepted before it is known, what failed is still created', async () => {
      const endpoint = await create();
      await startDispatcher();
      const a = slow.hold(records.id('A'));
      await importRecords(ctx, [records.upsert('A')]);
      await a.arrived;
      await importRecords(ctx, [records.upsert('X'), records.upsert('B')]);
      await importRecords(ctx, [records.upsert('X', 'closed')]);
      // The read after A is B, then X: B is accepted, X's first attempt fails.
      const x = slow.hold(records.id('X'));
      a.release();
      await x.arrived;
      await importRecords(ctx, [
        records.upsert('C'),
        records.upsert('X', 'investigating'),
        records.upsert('B', 'closed'),
      ]);
      x.release(500);
      await until(
        async () => (await ctx.runtime.services.webhooks.show(endpoint.id)).next_attempt_at !== null,
        30_000,
        'the retry scheduled',
      );
      const waiting = await knowledge(endpoint.id);
      assert.equal(waiting.known_through, seqOf('A'));
      assert.deepEqual(waiting.acknowledged, ['incident B']);
      // The retry (about 5 s later) reads from B: C, X in its latest state, B's change.
      await settled(endpoint.id, 6, 40_000);
      assert.deepEqual(seen(), [
        ['incident.created', 'A'],
        ['incident.created', 'B'],
        ['incident.created', 'X'],
        ['incident.created', 'C'],
        ['incident.created', 'X'],
        ['incident.updated', 'B'],
      ]);
      const log = (await ctx.runtime.services.webhooks.show(endpoint.id)).attempts.toReversed();
      assert.deepEqual(
        log.map((attempt) => attempt.status),
        [204, 204, 500, 204, 204, 204],
      );
      assert.equal((receiver.received[4]?.json.data.object as { status: string }).status, 'investigating');
    });

    test('a record deleted and brought back is created again, whether its deletion was sent or merged away', async () => {
      const endpoint = await create();
      await startDispatcher(3);
      // Reads of three, each cut at the batch size: the endpoint remembers each record it was sent.
      await importRecords(ctx, [records.upsert('X'), records.upsert('Y'), records.upsert('B')]);
      await settled(endpoint.id, 3);
      assert.deepEqual((await knowledge(endpoint.id)).acknowledged, [
        'incident B',
        'incident X',
        'incident Y',
      ]);
      await importRecords(ctx, [records.delete('X'), records.upsert('E'), records.upsert('G')]);
      await settled(endpoint.id, 6);
      const afterDeletion = await knowledge(endpoint.id);
      assert.equal(afterDeletion.known_through, endpoint.position);
      assert.deepEqual(
        afterDeletion.acknowledged,
        ['incident B', 'incident E', 'incident G', 'incident Y'],
        'X left with its deletion',
      );
      const yBefore = afterDeletion.createdSeqs.get('Y');
      // X comes back after its deletion was sent; Y is deleted and back before its deletion leaves
      // (merged away). Both change again after K, which the receiver gets first.
      const p1 = slow.hold(records.id('P1'));
      await importRecords(ctx, [records.upsert('P1'), records.upsert('P2'), records.upsert('P3')]);
      await p1.arrived;
      await importRecords(ctx, [records.upsert('X'), records.delete('Y')]);
      await importRecords(ctx, [records.upsert('Y'), records.upsert('K')]);
      await importRecords(ctx, [records.upsert('X', 'closed'), records.upsert('Y', 'closed')]);
      p1.release();
      await settled(endpoint.id, 12);
      const back = await knowledge(endpoint.id);
      assert.ok((back.createdSeqs.get('Y') ?? 0) > (yBefore ?? 0), 'Y is remembered in its new life');
      await importRecords(ctx, [records.upsert('X', 'investigating'), records.upsert('Y', 'investigating')]);
      await settled(endpoint.id, 14);
      assert.deepEqual(seen(), [
        ['incident.created', 'X'],
        ['incident.created', 'Y'],
        ['incident.created', 'B'],
        ['incident.deleted', 'X'],
        ['incident.created', 'E'],
        ['incident.created', 'G'],
        ['incident.created', 'P1'],
        ['incident.created', 'P2'],
        ['incident.created', 'P3'],
        ['incident.created', 'K'],
        ['incident.created', 'X'],
        ['incident.created', 'Y'],
        ['incident.updated', 'X'],
        ['incident.updated', 'Y'],
      ]);
      const after = await knowledge(endpoint.id);
      assert.equal(after.known_through, after.position);
      assert.deepEqual(after.acknowledged, []);
    });

    test('a filter that leaves created out: a record is heard of from its first change after its creation, merged or not', async () => {
      const endpoint = await create('incident.updated,incident.deleted');
      await startDispatcher();
      await importRecords(ctx, [records.upsert('A')]);
      await until(
        async () => (await ctx.runtime.services.webhooks.show(endpoint.id)).lag === 0,
        30_000,
        'past A',
      );
      const a = slow.hold(records.id('A'));
      await importRecords(ctx, [records.upsert('A', 'closed')]);
      await a.arrived;
      // X's creation and its change merge into one created, which the filter leaves out.
      await importRecords(ctx, [records.upsert('X'), records.upsert('B')]);
      await importRecords(ctx, [records.upsert('X', 'closed')]);
      a.release();
      await settled(endpoint.id, 1);
      // Left out by the filter counts as heard: X's next change is an update.
      await importRecords(ctx, [records.upsert('X', 'investigating')]);
      await settled(endpoint.id, 2);
      assert.deepEqual(seen(), [
        ['incident.updated', 'A'],
        ['incident.updated', 'X'],
      ]);
      assert.equal((receiver.received[1]?.json.data.object as { status: string }).status, 'investigating');
    });

    test('a worker restarted in the middle of a lag window keeps what the endpoint acknowledged; deleting the endpoint deletes it', async () => {
      const endpoint = await create();
      await startDispatcher(3);
      await importRecords(ctx, [records.upsert('X'), records.upsert('B'), records.upsert('C')]);
      await settled(endpoint.id, 3);
      await dispatcher?.stop();
      dispatcher = null;
      assert.deepEqual((await knowledge(endpoint.id)).acknowledged, [
        'incident B',
        'incident C',
        'incident X',
      ]);
      // While no worker runs: X changes, and M is created and changed with N between.
      await importRecords(ctx, [records.upsert('M'), records.upsert('X', 'closed'), records.upsert('N')]);
      await importRecords(ctx, [records.upsert('M', 'closed')]);
      await startDispatcher(3);
      await settled(endpoint.id, 6);
      assert.deepEqual(seen(), [
        ['incident.created', 'X'],
        ['incident.created', 'B'],
        ['incident.created', 'C'],
        ['incident.updated', 'X'],
        ['incident.created', 'N'],
        ['incident.created', 'M'],
      ]);
      assert.deepEqual((await knowledge(endpoint.id)).acknowledged, [
        'incident B',
        'incident C',
        'incident M',
        'incident N',
        'incident X',
      ]);
      await ctx.runtime.services.webhooks.delete(endpoint.id, 'test');
      const left = await ctx.db
        .selectFrom('webhook_acknowledged')
        .select('record_id')
        .where('endpoint_id', '=', endpoint.id)
        .execute();
      assert.deepEqual(left, []);
    });

    test('resend and restart from latest set the floor at the new position and forget what was acknowledged', async () => {
      const endpoint = await create();
      await startDispatcher(3);
      await importRecords(ctx, [records.upsert('X'), records.upsert('B'), records.upsert('C')]);
      await settled(endpoint.id, 3);
      assert.deepEqual((await knowledge(endpoint.id)).acknowledged, [
        'incident B',
        'incident C',
        'incident X',
      ]);
      // Resent from after X: X entered the view at the cursor (known), B and C after it (created).
      await ctx.runtime.services.webhooks.resend(
        endpoint.id,
        receiver.received[0]?.json.data.cursor ?? '',
        'test',
      );
      const resent = await knowledge(endpoint.id);
      assert.deepEqual([resent.known_through, resent.acknowledged], [seqOf('X'), []]);
      await settled(endpoint.id, 5);
      await importRecords(ctx, [records.upsert('X', 'closed')]);
      await settled(endpoint.id, 6);
      assert.deepEqual(seen(), [
        ['incident.created', 'X'],
        ['incident.created', 'B'],
        ['incident.created', 'C'],
        ['incident.created', 'B'],
        ['incident.created', 'C'],
        ['incident.updated', 'X'],
      ]);
      // The same rule for a restart from the head of a disabled endpoint.
      await importRecords(ctx, [records.upsert('D'), records.upsert('E'), records.upsert('G')]);
      await settled(endpoint.id, 9);
      assert.notDeepEqual((await knowledge(endpoint.id)).acknowledged, []);
      await ctx.runtime.services.webhooks.disable(endpoint.id, 'test');
      const restarted = await ctx.runtime.services.webhooks.enable(endpoint.id, 'test', { fromLatest: true });
      const latest = await knowledge(endpoint.id);
      assert.deepEqual([latest.known_through, latest.acknowledged], [restarted.position, []]);
    });
  });
}
