import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type CheckInput, planCheck } from '../../src/webhooks/plan-check.ts';

/** The plan check decides each step of a worker from its endpoint's row: read, wait, or disable. */

const NOW = Date.parse('2026-12-01T12:00:00Z');

/** An endpoint with API access, a change after its position, no retry pending, a fresh lease. */
function input(
  row: Partial<CheckInput['row']> = {},
  rest: Partial<Omit<CheckInput, 'row'>> = {},
): CheckInput {
  return {
    row: {
      api_access: 1,
      position: 10,
      purged_seq: 0,
      next_attempt_at: null,
      head: 11,
      failing_since: null,
      ...row,
    },
    readDue: true,
    leaseUntil: NOW + 60_000,
    timeoutMs: 10_000,
    leaseSeconds: 60,
    now: NOW,
    ...rest,
  };
}

describe('planCheck', () => {
  test('a change after the position, with access and a lease that covers a POST: read', () => {
    assert.deepEqual(planCheck(input()), { next: 'read' });
  });

  test('without API access: wait until woken, whatever else is due (even past retention)', () => {
    assert.deepEqual(planCheck(input({ api_access: 0, purged_seq: 20 })), { next: 'wait', ms: null });
  });

  test('a position older than the feed keeps: disable, saying how to restart it', () => {
    const check = planCheck(input({ position: 4, purged_seq: 5 }));
    assert.equal(check.next, 'disable');
    assert.match(check.next === 'disable' ? check.reason : '', /CHANGES_RETENTION_DAYS.*resend from latest/);
  });

  test('a retry not yet due: wait until it is', () => {
    const retry = new Date(NOW + 4_000).toISOString();
    assert.deepEqual(planCheck(input({ next_attempt_at: retry, failing_since: retry })), {
      next: 'wait',
      ms: 4_000,
    });
  });

  test('a retry that is due, on an endpoint caught up or not woken: read (the failed event goes again)', () => {
    const failing = {
      next_attempt_at: new Date(NOW - 1).toISOString(),
      failing_since: '2026-12-01T11:00:00Z',
    };
    assert.deepEqual(planCheck(input({ ...failing, head: 10 }, { readDue: false })), { next: 'read' });
  });

  test('caught up, or not woken since the last read: wait until woken', () => {
    assert.deepEqual(planCheck(input({ head: 10 })), { next: 'wait', ms: null });
    assert.deepEqual(planCheck(input({}, { readDue: false })), { next: 'wait', ms: null });
  });

  test('a lease that would run out before a POST could time out: wait a third of the lease for its renewal', () => {
    assert.deepEqual(planCheck(input({}, { leaseUntil: NOW + 10_000 })), { next: 'wait', ms: 20_000 });
    assert.deepEqual(planCheck(input({}, { leaseUntil: NOW + 10_001 })), { next: 'read' });
  });
});
