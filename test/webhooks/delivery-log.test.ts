import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import type { Insertable } from 'kysely';
import { Webhook } from 'standardwebhooks';
import { ATTEMPT_LOG_BYTES, ATTEMPTS_KEPT, webhookRepository } from '../../src/db/repositories/webhooks.ts';
import type { WebhookAttemptsTable } from '../../src/db/schema.ts';
import { InputError } from '../../src/errors.ts';
import { createTestContext, STORES, seedAccount, type TestContext } from '../helpers.ts';
import { until } from '../wait.ts';
import { importRecords, incident } from './feed.ts';
import { type Received, Receiver } from './receiver.ts';

/**
 * The delivery log (docs/webhooks.md, "Delivery log"), on each store, with the deliveries of one
 * instance running: what it keeps of each attempt (the request as sent, the answer with its first
 * 4 KiB, never a secret), how long (1,000 attempts, 30 days, 4 MiB per endpoint, on a clock the test
 * sets), its filters, and the two things it lets an operator do: redeliver one event, and skip the
 * event an endpoint is stuck on.
 */

const ENV = {
  WEBHOOKS_ALLOW_PRIVATE: 'true',
  WEBHOOK_TIMEOUT_MS: '2000',
  WEBHOOK_LEASE_SECONDS: '4',
};
const DAY_MS = 86_400_000;
const DEADLINE_MS = 60_000;

function verify(secret: string, received: Received): unknown {
  return new Webhook(secret).verify(received.body, {
    'webhook-id': String(received.headers['webhook-id']),
    'webhook-timestamp': String(received.headers['webhook-timestamp']),
    'webhook-signature': String(received.headers['webhook-signature']),
  });
}

/** A log row as a test seeds it: `i` sets its webhook id, `at` when it was made. */
function row(endpointId: string, i: number, at: Date, over: Partial<Insertable<WebhookAttemptsTable>> = {}) {
  return {
    endpoint_id: endpointId,
    webhook_id: `msg_seeded_${i}`,
    type: 'incident.created',
    seq: i,
    at: at.toISOString(),
    status: 204,
    duration_ms: 3,
    error: null,
    request_headers: '{"webhook-id":"msg_seeded"}',
    request_body: '{}',
    response_headers: '{}',
    response_body: '',
    outcome: 'success',
    size: 100,
    ...over,
  } satisfies Insertable<WebhookAttemptsTable>;
}

for (const store of STORES) {
  describe(`the webhook delivery log (${store})`, () => {
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

    const webhooks = () => ctx.runtime.services.webhooks;
    const create = async (path?: string) =>
      webhooks().create({ accountId, url: receiver.url(path), actor: 'test' });
    const storedAttempts = (endpointId: string) =>
      ctx.db
        .selectFrom('webhook_attempts')
        .selectAll()
        .where('endpoint_id', '=', endpointId)
        .orderBy('id')
        .execute();
    const auditOf = (endpointId: string) =>
      ctx.db
        .selectFrom('audit_events')
        .select(['actor', 'action', 'detail'])
        .where('subject_id', '=', endpointId)
        .orderBy('id')
        .execute();
    const endpointRow = async (endpointId: string) =>
      (await webhookRepository.findById(ctx.db, endpointId)) ?? assert.fail('the endpoint is stored');

    test('each attempt keeps the request as sent and the answer with its first 4 KiB; a secret is never kept or shown', async () => {
      // A character cut by the 4 KiB mark is left out, not garbled.
      const answer = `${'a'.repeat(4095)}é${'b'.repeat(6000)}`;
      receiver.answer = (received, response) => {
        response.setHeader('x-receiver', 'r1');
        response.statusCode = received.json.data.seq === null ? 200 : 201;
        response.end(answer);
      };
      const { endpoint, secret } = await create();
      const [a, b] = [randomUUID(), randomUUID()];
      await importRecords(ctx, [incident(accountId, a, 1), incident(accountId, b, 2)]);
      await receiver.waitFor(2, DEADLINE_MS);
      await until(async () => (await webhooks().show(endpoint.id)).lag === 0, DEADLINE_MS, 'both logged');
      // A rotation: the next messages carry two signatures, neither secret is kept.
      const { secret: rotated } = await webhooks().rotateSecret(endpoint.id, 'test', { overlapHours: 1 });
      await webhooks().sendTest(endpoint.id);

      const shown = await webhooks().show(endpoint.id);
      assert.equal(shown.attempts.length, 3);
      const byId = new Map(receiver.received.map((r) => [String(r.headers['webhook-id']), r]));
      for (const attempt of shown.attempts) {
        const received = byId.get(attempt.webhook_id) ?? assert.fail(`${attempt.webhook_id} was received`);
        assert.ok(attempt.request !== null && attempt.response !== null);
        assert.equal(attempt.request.body, received.body, 'the body as sent');
        for (const name of [
          'webhook-id',
          'webhook-timestamp',
          'webhook-signature',
          'content-type',
          'user-agent',
        ])
          assert.equal(attempt.request.headers[name], received.headers[name], name);
        assert.deepEqual(attempt.response.status, attempt.status);
        assert.equal(attempt.response.headers['x-receiver'], 'r1');
        assert.equal(attempt.response.body, 'a'.repeat(4095), 'the first 4 KiB of the answer');
        assert.equal(attempt.outcome, 'success');
      }
      const [test, ...changes] = shown.attempts;
      assert.equal(test?.type, 'webhook.test');
      assert.equal(test?.request?.headers['webhook-signature']?.split(' ').length, 2, 'two signatures');
      assert.deepEqual(
        changes.map((c) => [c.type, JSON.parse(c.request?.body ?? '{}').data.id, c.status]),
        [
          ['incident.created', b, 201],
          ['incident.created', a, 201],
        ],
      );

      // A failure keeps its answer too; no answer keeps none.
      receiver.answer = (_received, response) => {
        response.statusCode = 503;
        response.end('down for maintenance');
      };
      await webhooks().sendTest(endpoint.id);
      const closed = await Receiver.start();
      const unreachableUrl = closed.url();
      await closed.close();
      const { endpoint: unreachable, secret: unreachableSecret } = await webhooks().create({
        accountId,
        url: unreachableUrl,
        actor: 'test',
      });
      await webhooks().sendTest(unreachable.id);
      const [failed] = (await webhooks().show(endpoint.id)).attempts;
      assert.equal(failed?.outcome, 'http_error');
      assert.equal(failed?.response?.status, 503);
      assert.equal(failed?.response?.body, 'down for maintenance');
      const [nothing] = (await webhooks().show(unreachable.id)).attempts;
      assert.equal(nothing?.outcome, 'network_error');
      assert.equal(nothing?.response, null);
      assert.equal(JSON.parse(nothing?.request?.body ?? '{}').type, 'webhook.test');

      for (const [id, secrets] of [
        [endpoint.id, [secret, rotated]],
        [unreachable.id, [unreachableSecret]],
      ] as const) {
        const stored = JSON.stringify(await storedAttempts(id));
        const listed = JSON.stringify(await webhooks().show(id));
        for (const value of secrets) {
          const key = value.slice('whsec_'.length);
          assert.ok(!stored.includes(key), 'no secret in the stored log');
          assert.ok(!listed.includes(key), 'no secret in show');
          assert.ok(
            !JSON.stringify(
              await webhooks().attempt(id, (await webhooks().show(id)).attempts[0]?.id ?? 0),
            ).includes(key),
          );
        }
      }
    });

    test('the log keeps the newest 1,000 attempts, none older than 30 days, at most 4 MiB (the newest whatever its size)', async () => {
      const { endpoint } = await create('/kept');
      const id = endpoint.id;
      const now = new Date(Date.now() + DAY_MS);
      const ids = async () => (await storedAttempts(id)).map((r) => r.webhook_id);

      // By count: 1,005 recorded in two writes, the newest 1,000 kept. The rows are dated a day
      // ahead, out of reach of the instance's own hourly purge.
      await webhookRepository.recordAttempts(
        ctx.db,
        Array.from({ length: ATTEMPTS_KEPT - 10 }, (_, i) => row(id, i, new Date(now.getTime() - 60_000))),
        now,
      );
      await webhookRepository.recordAttempts(
        ctx.db,
        Array.from({ length: 15 }, (_, i) => row(id, ATTEMPTS_KEPT - 10 + i, now)),
        now,
      );
      let kept = await ids();
      assert.equal(kept.length, ATTEMPTS_KEPT);
      assert.equal(kept[0], 'msg_seeded_5');
      assert.equal(kept.at(-1), `msg_seeded_${ATTEMPTS_KEPT + 4}`);
      assert.equal((await webhooks().show(id, undefined, { limit: 1000 })).attempts.length, ATTEMPTS_KEPT);

      // By age, on the clock given: 30 days on from the second write, less 30 s, the first write's
      // attempts (a minute older) are past 30 days, the second's are not.
      const later = new Date(now.getTime() + 30 * DAY_MS - 30_000);
      await webhookRepository.recordAttempts(ctx.db, [row(id, 2000, later)], later);
      kept = await ids();
      assert.deepEqual(kept, [
        ...Array.from({ length: 15 }, (_, i) => `msg_seeded_${ATTEMPTS_KEPT - 10 + i}`),
        'msg_seeded_2000',
      ]);

      // By bytes: 4 attempts of a MiB fit, a fifth pushes the oldest out; one bigger than the bound
      // alone is kept, the newest always.
      const mib = 1024 * 1024;
      for (let i = 0; i < 5; i += 1)
        await webhookRepository.recordAttempts(ctx.db, [row(id, 3000 + i, later, { size: mib })], later);
      kept = await ids();
      assert.deepEqual(kept, ['msg_seeded_3001', 'msg_seeded_3002', 'msg_seeded_3003', 'msg_seeded_3004']);
      await webhookRepository.recordAttempts(
        ctx.db,
        [row(id, 4000, later, { size: ATTEMPT_LOG_BYTES + 1 })],
        later,
      );
      assert.deepEqual(await ids(), ['msg_seeded_4000']);
    });

    test('old attempts leave every log, and show never lists one older than 30 days', async () => {
      const { endpoint: quiet } = await create('/quiet');
      const { endpoint: other } = await create('/other');
      const now = new Date();
      // Written as the release before could leave them (no trim of this release's), straight in.
      await ctx.db
        .insertInto('webhook_attempts')
        .values([
          row(quiet.id, 1, new Date(now.getTime() - 31 * DAY_MS)),
          row(quiet.id, 2, new Date(now.getTime() - 29 * DAY_MS)),
          row(other.id, 3, new Date(now.getTime() - 40 * DAY_MS)),
          row(other.id, 4, new Date(now.getTime() - 60_000)),
        ])
        .execute();
      assert.deepEqual(
        (await webhooks().show(quiet.id)).attempts.map((a) => a.webhook_id),
        ['msg_seeded_2'],
        'not listed',
      );
      await webhookRepository.purgeOldAttempts(ctx.db, now);
      assert.deepEqual(
        (await storedAttempts(quiet.id)).map((r) => r.webhook_id),
        ['msg_seeded_2'],
      );
      assert.deepEqual(
        (await storedAttempts(other.id)).map((r) => r.webhook_id),
        ['msg_seeded_4'],
      );
      // Two days on, the other went too.
      await webhookRepository.purgeOldAttempts(ctx.db, new Date(now.getTime() + 2 * DAY_MS));
      assert.deepEqual(await storedAttempts(quiet.id), []);
    });

    test('show filters the log by outcome and by event type; a bad filter or limit is refused', async () => {
      const { endpoint } = await create('/filtered');
      const at = new Date();
      await webhookRepository.recordAttempts(ctx.db, [
        row(endpoint.id, 1, at, { type: 'incident.created' }),
        row(endpoint.id, 2, at, { type: 'incident.updated', status: 500, outcome: 'http_error' }),
        row(endpoint.id, 3, at, { type: 'user.created', status: null, outcome: 'timeout' }),
        row(endpoint.id, 4, at, { type: 'webhook.test', status: 410, outcome: 'gone' }),
        // Logged by the release before 0014, during a rolling upgrade: no outcome, no request.
        row(endpoint.id, 5, at, {
          type: 'user.deleted',
          status: null,
          error: 'refused, not connected: 10.0.0.1 (RFC 1918 private) is not a public address',
          outcome: null,
          request_headers: null,
          request_body: null,
          response_headers: null,
          response_body: null,
        }),
      ]);
      const listed = async (query: Parameters<ReturnType<typeof webhooks>['show']>[2]) =>
        (await webhooks().show(endpoint.id, undefined, query)).attempts.map((a) => a.webhook_id.slice(11));
      assert.deepEqual(await listed({}), ['5', '4', '3', '2', '1']);
      assert.deepEqual(await listed({ outcome: 'success' }), ['1']);
      assert.deepEqual(await listed({ outcome: 'failure' }), ['5', '4', '3', '2']);
      assert.deepEqual(await listed({ outcome: 'timeout' }), ['3']);
      assert.deepEqual(await listed({ outcome: 'gone' }), ['4']);
      assert.deepEqual(await listed({ type: 'incident.*' }), ['2', '1']);
      assert.deepEqual(await listed({ type: 'user.created, webhook.test' }), ['4', '3']);
      assert.deepEqual(await listed({ type: 'incident.*', outcome: 'failure' }), ['2']);
      assert.deepEqual(await listed({ limit: '2' }), ['5', '4']);
      const legacy = (await webhooks().show(endpoint.id, undefined, { type: 'user.deleted' })).attempts[0];
      assert.equal(legacy?.outcome, 'refused');
      assert.equal(legacy?.request, null);
      assert.equal(legacy?.response, null);

      for (const [query, message] of [
        [{ outcome: 'sometimes' }, /^outcome must be one of success, failure, http_error/],
        [{ type: 'incident.exploded' }, /^unknown event type "incident.exploded"/],
        [{ limit: '0' }, /^limit must be a whole number from 1 to 1000/],
        [{ limit: '1001' }, /^limit must be a whole number from 1 to 1000/],
      ] as const)
        await assert.rejects(webhooks().show(endpoint.id, undefined, query), (error: Error) => {
          assert.ok(error instanceof InputError);
          assert.match(error.message, message);
          return true;
        });
    });

    test('redeliver sends one logged event again: the same webhook-id and body, a new timestamp and signature; logged, audited, the position kept', async () => {
      const { endpoint } = await create('/redeliver');
      const [a, b] = [randomUUID(), randomUUID()];
      await importRecords(ctx, [incident(accountId, a, 1), incident(accountId, b, 2)]);
      await receiver.waitFor(2, DEADLINE_MS);
      await until(async () => (await webhooks().show(endpoint.id)).lag === 0, DEADLINE_MS, 'both delivered');
      const first = receiver.received[0] as Received;
      const webhookId = String(first.headers['webhook-id']);
      // As if it was delivered two hours ago: a receiver refuses a timestamp that old.
      const twoHoursAgo = new Date(Date.now() - 2 * 3_600_000);
      const logged = (await storedAttempts(endpoint.id)).find((r) => r.webhook_id === webhookId);
      assert.ok(logged !== undefined);
      const oldHeaders = {
        ...(JSON.parse(logged.request_headers ?? '{}') as Record<string, string>),
        'webhook-timestamp': String(Math.floor(twoHoursAgo.getTime() / 1000)),
      };
      await ctx.db
        .updateTable('webhook_attempts')
        .set({ at: twoHoursAgo.toISOString(), request_headers: JSON.stringify(oldHeaders) })
        .where('id', '=', logged.id)
        .execute();
      // A rotation without overlap since: only the new secret signs now.
      const { secret } = await webhooks().rotateSecret(endpoint.id, 'test', { overlapHours: 0 });
      const before = await endpointRow(endpoint.id);

      const result = await webhooks().redeliver(endpoint.id, webhookId, 'someone');
      assert.equal(result.status, 204);
      assert.equal(receiver.received.length, 3);
      const again = receiver.received[2] as Received;
      assert.equal(again.headers['webhook-id'], webhookId, 'the same webhook-id');
      assert.equal(again.body, first.body, 'the body as it was');
      assert.ok(Number(again.headers['webhook-timestamp']) > Number(oldHeaders['webhook-timestamp']));
      assert.notEqual(again.headers['webhook-signature'], first.headers['webhook-signature']);
      assert.deepEqual(
        verify(secret, again),
        JSON.parse(first.body),
        'the receiver verifies the new signature',
      );

      const after = await endpointRow(endpoint.id);
      assert.equal(after.position, before.position, 'the position does not move');
      assert.equal(after.failing_since, null);
      const [newest] = (await webhooks().show(endpoint.id)).attempts;
      assert.equal(newest?.webhook_id, webhookId);
      assert.equal(newest?.type, 'incident.created');
      assert.equal(newest?.request?.headers['webhook-signature'], again.headers['webhook-signature']);
      assert.deepEqual((await auditOf(endpoint.id)).at(-1), {
        actor: 'someone',
        action: 'redelivered',
        detail: `${webhookId} (incident.created, seq ${JSON.parse(first.body).data.seq}): HTTP 204`,
      });

      // An id the log does not hold: refused, nothing sent, nothing written.
      const attemptsBefore = await storedAttempts(endpoint.id);
      const auditBefore = await auditOf(endpoint.id);
      for (const unknown of ['msg_nope', '', '\0'])
        await assert.rejects(
          webhooks().redeliver(endpoint.id, unknown, 'someone'),
          /holds no event with webhook id/,
        );
      await assert.rejects(
        webhooks().redeliver(randomUUID(), webhookId, 'someone'),
        /no webhook endpoint with id/,
      );
      assert.equal(receiver.received.length, 3);
      assert.deepEqual(await storedAttempts(endpoint.id), attemptsBefore);
      assert.deepEqual(await auditOf(endpoint.id), auditBefore);
      const { lease_owner: _owner, lease_expires_at: _until, ...unchanged } = after;
      const { lease_owner: _owner2, lease_expires_at: _until2, ...now } = await endpointRow(endpoint.id);
      assert.deepEqual(now, unchanged, 'the endpoint as it was (its lease is renewed meanwhile)');
    });

    test('skip passes the event a failing endpoint is stuck on: the position moves just past it, audited, the next one goes at once; refused when not stuck', async () => {
      const { endpoint } = await create('/skip');
      const [a, b] = [randomUUID(), randomUUID()];
      receiver.answer = (received, response) => {
        response.statusCode = received.json.data.id === a ? 500 : 204;
        response.end();
      };
      await assert.rejects(
        webhooks().skip(endpoint.id, 'someone'),
        /is not stuck on an event: its deliveries are not failing/,
      );
      await importRecords(ctx, [incident(accountId, a, 1), incident(accountId, b, 2)]);
      await until(
        async () => (await endpointRow(endpoint.id)).failing_since !== null,
        DEADLINE_MS,
        'failing',
      );
      const stuck = await endpointRow(endpoint.id);
      const seqA = receiver.received[0]?.json.data.seq as number;
      assert.equal(stuck.position, seqA - 1);
      assert.deepEqual(await webhooks().stuckEvent(endpoint.id), {
        webhook_id: receiver.received[0]?.headers['webhook-id'],
        type: 'incident.created',
        seq: seqA,
        record_id: a,
      });

      const { skipped, endpoint: shown } = await webhooks().skip(endpoint.id, 'someone');
      assert.deepEqual(skipped, {
        webhook_id: receiver.received[0]?.headers['webhook-id'],
        type: 'incident.created',
        seq: seqA,
        record_id: a,
      });
      assert.equal(shown.position, seqA, 'just past the event');
      assert.equal(shown.failing_since, null);
      assert.equal(shown.next_attempt_at, null);
      assert.deepEqual((await auditOf(endpoint.id)).at(-1), {
        actor: 'someone',
        action: 'skipped',
        detail: `${skipped.webhook_id} (incident.created ${a}, seq ${seqA}); failing since ${stuck.failing_since}`,
      });
      await until(() => receiver.received.some((r) => r.json.data.id === b), DEADLINE_MS, 'the next event');
      await until(async () => (await webhooks().show(endpoint.id)).lag === 0, DEADLINE_MS, 'caught up');
      // The skipped event was never sent again: only its failed attempt(s), then b.
      assert.deepEqual([...new Set(receiver.received.map((r) => r.json.data.id))], [a, b]);
      assert.equal(receiver.received.at(-1)?.json.data.id, b);

      // Caught up: nothing to skip, nothing changed.
      const caughtUp = await endpointRow(endpoint.id);
      const audit = await auditOf(endpoint.id);
      await assert.rejects(webhooks().skip(endpoint.id, 'someone'), /is not stuck on an event/);
      await assert.rejects(webhooks().skip(randomUUID(), 'someone'), /no webhook endpoint with id/);
      assert.equal((await endpointRow(endpoint.id)).position, caughtUp.position);
      assert.deepEqual(await auditOf(endpoint.id), audit);
    });

    test('a skip while an attempt is in flight wins over that attempt, even once this instance claims the endpoint again', async () => {
      const { endpoint } = await create('/skip-in-flight');
      const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
      let release: () => void = () => {};
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      receiver.answer = (received, response) => {
        const retry =
          received.json.data.id === a && receiver.received.filter((r) => r.json.data.id === a).length === 2;
        // a fails; its retry is held until the skip is made and claimed, then fails too.
        void (retry ? held : Promise.resolve()).then(() => {
          response.statusCode = received.json.data.id === a ? 500 : 204;
          response.end();
        });
      };
      await importRecords(ctx, [incident(accountId, a, 1), incident(accountId, b, 2)]);
      // The retry comes about 5 s after the first failure.
      await receiver.waitFor(2, DEADLINE_MS);
      assert.equal(receiver.received[1]?.json.data.id, a, 'the retry of a is in flight');
      const { skipped } = await webhooks().skip(endpoint.id, 'someone');
      assert.equal(skipped.record_id, a);
      await until(
        async () => (await endpointRow(endpoint.id)).lease_owner !== null,
        DEADLINE_MS,
        'claimed again',
      );
      release();
      await until(() => receiver.received.some((r) => r.json.data.id === b), DEADLINE_MS, 'b');
      // A later event: whatever the held attempt could have written would be seen by then.
      await importRecords(ctx, [incident(accountId, c, 3)]);
      await until(() => receiver.received.some((r) => r.json.data.id === c), DEADLINE_MS, 'c');
      await until(async () => (await webhooks().show(endpoint.id)).lag === 0, DEADLINE_MS, 'caught up');
      assert.deepEqual(
        receiver.received.map((r) => r.json.data.id),
        [a, a, b, c],
      );
      const final = await endpointRow(endpoint.id);
      assert.equal(final.failing_since, null, 'the held failure did not write over the skip');
      assert.equal(final.position, receiver.received[3]?.json.data.seq);
      assert.deepEqual(
        (await webhooks().show(endpoint.id)).attempts.map((attempt) => [attempt.type, attempt.status]),
        [
          ['incident.created', 204],
          ['incident.created', 204],
          ['incident.created', 500],
        ],
        'the held attempt was not logged: its worker no longer held the endpoint',
      );
    });
  });
}
