import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, mock, test } from 'node:test';
import type { Redis } from 'ioredis';
import { openRedis, REDIS_COMMAND_TIMEOUT_MS, RedisSuspicion, redisReady } from '../src/redis.ts';
import { blockAfterNextWriteTo } from './faults/busy-loop.ts';
import { type OwnRedis, startRedis } from './faults/harness.ts';

describe('RedisSuspicion', () => {
  beforeEach(() => mock.timers.enable({ apis: ['Date'], now: 1_000_000 }));
  afterEach(() => mock.timers.reset());

  test('a failure opens the period; failures within it do not lengthen it; after it Redis is asked again', () => {
    const suspicion = new RedisSuspicion(1000);
    assert.equal(suspicion.suspect, false, 'nothing failed yet');
    suspicion.failed();
    assert.equal(suspicion.suspect, true);
    mock.timers.tick(600);
    suspicion.failed();
    mock.timers.tick(399);
    assert.equal(suspicion.suspect, true, '999 ms after the first failure');
    mock.timers.tick(1);
    assert.equal(
      suspicion.suspect,
      false,
      'a second after the first failure, the later one within it notwithstanding',
    );
    suspicion.failed();
    assert.equal(suspicion.suspect, true, 'a failure after the period opens a new one');
  });
});

/** Runs `command` and says when it settled (`performance.now()`) and how. */
async function settled<T>(command: Promise<T>): Promise<{ at: number; value?: T; error?: Error }> {
  try {
    const value = await command;
    return { at: performance.now(), value };
  } catch (error) {
    return { at: performance.now(), error: error instanceof Error ? error : new Error(String(error)) };
  }
}

describe('command deadline (a Redis of the test own)', () => {
  let own: OwnRedis;
  let connection: Redis;

  before(async () => {
    own = await startRedis();
  });
  after(async () => {
    await own?.stop();
  });
  beforeEach(async () => {
    connection = openRedis(own.url);
    assert.ok(await redisReady(connection), 'own Redis answers');
    await connection.set('deadline-test', 'value');
  });
  afterEach(() => connection.disconnect());

  test('a reply that came while the event loop was busy for two deadlines is read, not taken for lateness', async () => {
    const blocked = blockAfterNextWriteTo(own.port, 2 * REDIS_COMMAND_TIMEOUT_MS);
    const reply = await settled(connection.get('deadline-test'));
    assert.ok((await blocked) >= 2 * REDIS_COMMAND_TIMEOUT_MS, 'the loop was held past the deadline');
    assert.equal(reply.error, undefined, 'the command did not fail');
    assert.equal(reply.value, 'value');
  });

  test('Redis frozen: the command fails after about the deadline', async () => {
    own.process.kill('SIGSTOP');
    try {
      const sent = performance.now();
      const late = await settled(connection.get('deadline-test'));
      const waited = late.at - sent;
      assert.ok(late.error !== undefined, 'the command failed');
      // (Timers count from the loop's clock, a little behind `performance.now()`.)
      assert.ok(waited > REDIS_COMMAND_TIMEOUT_MS / 2, `failed after ${Math.round(waited)} ms`);
      assert.ok(waited < 2 * REDIS_COMMAND_TIMEOUT_MS, `failed after ${Math.round(waited)} ms`);
    } finally {
      own.process.kill('SIGCONT');
    }
  });
});
