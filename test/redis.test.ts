import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, mock, test } from 'node:test';
import { RedisSuspicion } from '../src/redis.ts';

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
