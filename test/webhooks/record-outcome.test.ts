import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { SentAttempt } from '../../src/webhooks/attempt.ts';
import type { Known } from '../../src/webhooks/fetch-batch.ts';
import type { PostResult } from '../../src/webhooks/outbound.ts';
import type { EventChange } from '../../src/webhooks/payload.ts';
import {
  newProgress,
  type OutcomeContext,
  passed,
  recordOutcome,
  storedAfter,
} from '../../src/webhooks/record-outcome.ts';
import { RETRY_SCHEDULE_S } from '../../src/webhooks/retry.ts';

/**
 * What a worker keeps of each outcome until it writes it: the position moves past accepted events
 * only, a failure schedules its retry or disables the endpoint, and what the receiver knows of each
 * record follows what it heard. (The writes themselves: test/webhooks/delivery.test.ts.)
 */

const AT = new Date('2026-12-01T12:00:00Z');

function change(seq: number, over: Partial<EventChange> = {}): EventChange {
  return {
    seq,
    type: 'incident',
    op: 'upsert',
    id: `incident-${seq}`,
    object: {},
    changed_at: AT.toISOString(),
    createdSeq: seq,
    ...over,
  };
}

function sent(result: Partial<PostResult>, outcome: SentAttempt['outcome']): SentAttempt {
  return {
    webhookId: 'msg_1',
    type: 'incident.created',
    at: AT,
    outcome,
    request: { headers: { 'webhook-id': 'msg_1' }, body: '{}' },
    result: {
      status: null,
      error: null,
      response: null,
      durationMs: 2_000,
      retryAfterMs: null,
      failure: null,
      ...result,
    },
  };
}

const NOTHING_KNOWN: Known = { floor: 0, acknowledged: new Map() };

function context(over: Partial<OutcomeContext> = {}): OutcomeContext {
  return {
    row: { id: 'endpoint-1', failing_since: null, failed_attempts: 0 },
    known: NOTHING_KNOWN,
    recovered: false,
    disableAfterHours: 72,
    ...over,
  };
}

describe('recordOutcome', () => {
  test('a 2xx: the attempt logged, the position past it, the failure over, the record known', () => {
    const progress = newProgress(4);
    const answer = { headers: { 'x-request-id': 'r1' }, body: 'ok' };
    const verdict = recordOutcome(
      progress,
      change(5),
      sent({ status: 204, response: answer }, 'success'),
      context(),
    );
    assert.deepEqual(verdict, { next: 'continue' });
    assert.equal(progress.position, 5);
    assert.equal(progress.recovered, true);
    assert.equal(progress.retry, null);
    assert.deepEqual(progress.last, { status: 204, at: AT.toISOString() });
    assert.deepEqual(progress.attempts, [
      {
        endpoint_id: 'endpoint-1',
        webhook_id: 'msg_1',
        type: 'incident.created',
        seq: 5,
        at: AT.toISOString(),
        status: 204,
        duration_ms: 2_000,
        error: null,
        request_headers: '{"webhook-id":"msg_1"}',
        request_body: '{}',
        response_headers: '{"x-request-id":"r1"}',
        response_body: 'ok',
        outcome: 'success',
        // The bytes it holds: the id, the type, both headers' JSON and both bodies.
        size: 5 + 16 + 22 + 2 + 21 + 2,
      },
    ]);
    assert.deepEqual(
      [...progress.acknowledged.values()],
      [{ record_type: 'incident', record_id: 'incident-5', created_seq: 5 }],
    );
  });

  test('a first failure: the position stays, the retry is the first step after the attempt ends', () => {
    const progress = newProgress(4);
    const verdict = recordOutcome(
      progress,
      change(5),
      sent({ status: 500, error: 'HTTP 500' }, 'http_error'),
      context(),
    );
    assert.deepEqual(verdict, { next: 'retry', failingSince: AT.toISOString() });
    assert.equal(progress.position, 4);
    assert.equal(progress.acknowledged.size, 0);
    assert.equal(progress.attempts.length, 1);
    const retry = progress.retry;
    assert.ok(retry !== null);
    assert.equal(retry.failing_since, AT.toISOString());
    assert.equal(retry.failed_attempts, 1);
    // From the attempt's end (2 s after its start), the first step with ±20% jitter.
    const wait = Date.parse(retry.next_attempt_at) - (AT.getTime() + 2_000);
    const step = (RETRY_SCHEDULE_S[0] ?? 0) * 1000;
    assert.ok(wait >= step * 0.8 && wait <= step * 1.2, `waits ${wait} ms`);
  });

  test('a failure of an endpoint already failing counts on; after an event of the batch was accepted, it starts again', () => {
    const failing = context({
      row: { id: 'endpoint-1', failing_since: '2026-12-01T10:00:00.000Z', failed_attempts: 2 },
    });
    const progress = newProgress(4);
    recordOutcome(progress, change(5), sent({}, 'timeout'), failing);
    assert.equal(progress.retry?.failed_attempts, 3);
    assert.equal(progress.retry.failing_since, '2026-12-01T10:00:00.000Z');
    const recovered = newProgress(4);
    recordOutcome(recovered, change(5), sent({}, 'timeout'), { ...failing, recovered: true });
    assert.equal(recovered.retry?.failed_attempts, 1);
    assert.equal(recovered.retry.failing_since, AT.toISOString());
  });

  test('410 Gone disables at once, with the reason', () => {
    const progress = newProgress(4);
    const verdict = recordOutcome(progress, change(5), sent({ status: 410 }, 'gone'), context());
    assert.deepEqual(verdict, {
      next: 'disable',
      reason: `the receiver answered 410 Gone (${AT.toISOString()})`,
    });
    assert.equal(progress.retry, null);
    assert.equal(progress.attempts.length, 1);
  });

  test('failing for WEBHOOK_DISABLE_AFTER_HOURS disables, naming since when and the last error', () => {
    const since = new Date(AT.getTime() - 72 * 3_600_000).toISOString();
    const verdict = recordOutcome(
      newProgress(4),
      change(5),
      sent({ error: 'connection refused' }, 'network_error'),
      context({ row: { id: 'endpoint-1', failing_since: since, failed_attempts: 30 } }),
    );
    assert.deepEqual(verdict, {
      next: 'disable',
      reason: `failing since ${since} (last: connection refused)`,
    });
  });
});

describe('passed: what the receiver knows after hearing of a change', () => {
  test('an upsert of a record it knew records nothing; a deletion of a record it had acknowledged forgets it', () => {
    const known: Known = { floor: 3, acknowledged: new Map([['incident:incident-7', 7]]) };
    const progress = newProgress(4);
    passed(progress, known, change(5, { id: 'incident-1', createdSeq: 2 }));
    assert.equal(progress.acknowledged.size, 0);
    passed(progress, known, change(8, { id: 'incident-7', op: 'delete' }));
    assert.equal(progress.position, 8);
    assert.deepEqual(
      [...progress.forgotten.values()],
      [{ record_type: 'incident', record_id: 'incident-7' }],
    );
  });

  test('a record back in view after a deletion is acknowledged anew, and no longer forgotten', () => {
    const known: Known = { floor: 0, acknowledged: new Map([['incident:incident-7', 7]]) };
    const progress = newProgress(4);
    passed(progress, known, change(8, { id: 'incident-7', op: 'delete' }));
    passed(progress, known, change(9, { id: 'incident-7', createdSeq: 9 }));
    assert.equal(progress.forgotten.size, 0);
    assert.deepEqual(
      [...progress.acknowledged.values()],
      [{ record_type: 'incident', record_id: 'incident-7', created_seq: 9 }],
    );
  });
});

describe('storedAfter: what webhook_acknowledged holds once progress is written', () => {
  test('a new floor empties it; records acknowledged fill it; otherwise it is as it was', () => {
    const floor = newProgress(4);
    floor.knownThrough = 9;
    assert.equal(storedAfter(floor, 'held'), 'empty');
    const acknowledged = newProgress(4);
    passed(acknowledged, NOTHING_KNOWN, change(5));
    assert.equal(storedAfter(acknowledged, 'empty'), 'held');
    assert.equal(storedAfter(newProgress(4), 'unknown'), 'unknown');
    assert.equal(storedAfter(newProgress(4), 'empty'), 'empty');
  });
});
