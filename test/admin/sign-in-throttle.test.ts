import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { SignInThrottle } from '../../src/admin/sign-in-throttle.ts';
import { openRedis, redisReady } from '../../src/redis.ts';
import { REDIS_URL } from '../helpers.ts';

describe('sign-in throttle shared through Redis', () => {
  // Two connections, as two server instances would have.
  const connections = [openRedis(REDIS_URL), openRedis(REDIS_URL)];
  const [first, second] = connections.map((redis) => SignInThrottle.create(redis)) as [
    SignInThrottle,
    SignInThrottle,
  ];
  before(async () => {
    for (const redis of connections) assert.equal(await redisReady(redis), true);
  });
  after(() => {
    for (const redis of connections) redis.disconnect();
  });

  // Names of this run only, so runs sharing one Redis never see each other's counts.
  const email = `throttle-${randomUUID()}@example.test`;
  const address = `198.51.100.${Math.floor(Math.random() * 250) + 1}-${randomUUID().slice(0, 8)}`;

  test('failures counted on two instances add up to one limit per email, and success clears it', async () => {
    for (let i = 0; i < 3; i += 1) await first.recordFailure(email, address);
    for (let i = 0; i < 2; i += 1) await second.recordFailure(email.toUpperCase(), address);

    // Both instances see the fifth failure: the email is now refused on either, for up to 15 minutes.
    for (const throttle of [first, second]) {
      const wait = await throttle.secondsToWait(email, `${address}-elsewhere`);
      assert.ok(wait >= 1 && wait <= 15 * 60, String(wait));
    }
    assert.equal(await first.secondsToWait(`other-${email}`, `${address}-elsewhere`), 0);

    await second.recordSuccess(email);
    assert.equal(await first.secondsToWait(email, `${address}-elsewhere`), 0);
  });
});
