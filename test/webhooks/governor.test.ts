import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DeliveryGovernor } from '../../src/webhooks/governor.ts';

/**
 * The governor paces deliveries only while the event loop is saturated and API responses are being
 * sent: a loop busy with deliveries alone, or API traffic on a loop with room, leaves them alone.
 */

function governor(utilization: number, eventsPerSecondWhenBusy = 100) {
  let responses = 0;
  const paced = new DeliveryGovernor({ eventsPerSecondWhenBusy, utilization: () => utilization });
  paced.yieldTo(() => responses);
  return {
    paced,
    respond(count: number) {
      responses += count;
    },
  };
}

/** Milliseconds `count` turns take, one after another. */
async function turns(paced: DeliveryGovernor, count: number): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < count; i += 1) await paced.turn(new AbortController().signal);
  return performance.now() - started;
}

describe('DeliveryGovernor', () => {
  test('a saturated loop that is sending API responses paces deliveries to the busy rate', async () => {
    const { paced, respond } = governor(0.95, 100);
    respond(500);
    paced.sample();
    assert.equal(paced.isYielding, true);
    // 11 turns at 100 a second: the 11th leaves 100 ms after the first.
    assert.ok((await turns(paced, 11)) >= 95);
  });

  test('a saturated loop with no API response since the last sample (deliveries alone) does not pace', async () => {
    const { paced, respond } = governor(0.99);
    respond(10);
    paced.sample();
    paced.sample();
    assert.equal(paced.isYielding, false);
    assert.ok((await turns(paced, 50)) < 50);
  });

  test('API traffic on a loop with room does not pace', () => {
    const { paced, respond } = governor(0.6);
    respond(1000);
    paced.sample();
    assert.equal(paced.isYielding, false);
  });

  test('pacing ends with the load, and a wait ends when its signal does', async () => {
    const { paced, respond } = governor(0.95, 1);
    respond(1);
    paced.sample();
    await paced.turn(new AbortController().signal);
    // The next slot is a second away; the abort ends the wait at once.
    const stop = new AbortController();
    const started = performance.now();
    const waiting = paced.turn(stop.signal);
    stop.abort();
    await waiting;
    assert.ok(performance.now() - started < 500);
    paced.sample();
    assert.equal(paced.isYielding, false, 'no response since: the load is gone');
    assert.ok((await turns(paced, 20)) < 50);
  });

  test('without yieldTo (no API in the process) it never paces', () => {
    const paced = new DeliveryGovernor({ eventsPerSecondWhenBusy: 100, utilization: () => 1 });
    paced.sample();
    assert.equal(paced.isYielding, false);
  });
});
