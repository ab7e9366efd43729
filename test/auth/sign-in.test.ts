import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { hashPassword, verifyPassword } from '../../src/auth/passwords.ts';
import { SignIn } from '../../src/auth/sign-in.ts';
import { openRedis, redisReady } from '../../src/redis.ts';
import { createTestContext, STORES, seedAccount, type TestContext } from '../helpers.ts';
import { AdminClient, PASSWORD, seedUser } from '../routes/admin/admin-helpers.ts';
import { cheapPasswordHash } from './password-fixtures.ts';
import { type OwnRedis, startRedis } from '../faults/harness.ts';

const CURRENT_COST = /^scrypt\$131072\$8\$1\$/;

for (const store of STORES) {
  describe(`sign-in (${store})`, () => {
    let ctx: TestContext;
    let redis: OwnRedis;
    let accountId: string;

    before(async () => {
      redis = await startRedis();
      ctx = await createTestContext(store);
      accountId = await seedAccount(ctx.db);
    });
    after(async () => {
      await ctx.close();
      await redis.stop();
    });

    test('new password hashes use scrypt at OWASP minimum cost (N=2^17, r=8, p=1)', async () => {
      const stored = await hashPassword('a long passphrase');
      assert.match(stored, CURRENT_COST);
      assert.equal(await verifyPassword('a long passphrase', stored), true);
      assert.equal(await verifyPassword('another passphrase', stored), false);
    });

    test('an older, cheaper hash still signs in, and is re-hashed at the current cost', async () => {
      const user = await seedUser(ctx.db, accountId);
      const older = cheapPasswordHash(PASSWORD, 2 ** 15);
      await ctx.db.updateTable('users').set({ password_hash: older }).where('id', '=', user.id).execute();
      const hashOf = async () =>
        (
          await ctx.db
            .selectFrom('users')
            .select('password_hash')
            .where('id', '=', user.id)
            .executeTakeFirstOrThrow()
        ).password_hash as string;

      const wrong = await new AdminClient(ctx.app, '10.20.0.1').signIn(user.email, 'not the password');
      assert.equal(wrong.statusCode, 401);
      assert.equal(await hashOf(), older, 'a failed sign-in changes nothing');

      const res = await new AdminClient(ctx.app, '10.20.0.1').signIn(user.email);
      assert.equal(res.statusCode, 303);
      const rehashed = await hashOf();
      assert.match(rehashed, CURRENT_COST);
      assert.equal(await verifyPassword(PASSWORD, rehashed), true);
      assert.equal((await new AdminClient(ctx.app, '10.20.0.1').signIn(user.email)).statusCode, 303);
    });

    test('two instances on one Redis share the counts; a correct password clears the email', async () => {
      // Two connections and two throttles, as two server instances would have.
      const connections = [openRedis(redis.url), openRedis(redis.url)];
      try {
        for (const connection of connections) assert.equal(await redisReady(connection), true);
        const [first, second] = connections.map((connection) => SignIn.create(connection)) as [
          SignIn,
          SignIn,
        ];
        const user = await seedUser(ctx.db, accountId);
        const from = (i: number) => `192.0.2.${i}-${randomUUID().slice(0, 8)}`;

        for (let i = 0; i < 3; i += 1) {
          const result = await first.attempt(ctx.db, {
            email: user.email,
            password: 'wrong',
            address: from(i),
          });
          assert.equal(result.outcome, 'incorrect');
        }
        for (let i = 3; i < 5; i += 1) {
          const result = await second.attempt(ctx.db, {
            email: ` ${user.email.toUpperCase()} `,
            password: 'wrong',
            address: from(i),
          });
          assert.equal(result.outcome, 'incorrect');
        }
        for (const instance of [first, second]) {
          const result = await instance.attempt(ctx.db, {
            email: user.email,
            password: PASSWORD,
            address: from(9),
          });
          assert.equal(result.outcome, 'throttled');
          assert.ok(result.outcome === 'throttled' && result.retryAfterSeconds <= 15 * 60);
        }

        // Once the window is over (here: the count is dropped, as Redis expiry would), the right
        // password signs in and clears the email's count, so earlier typos do not linger.
        await connections[0]?.del(`safety-api:sign-in-email:${user.email.toLowerCase()}`);
        await first.attempt(ctx.db, { email: user.email, password: 'typo', address: from(10) });
        const ok = await second.attempt(ctx.db, { email: user.email, password: PASSWORD, address: from(11) });
        assert.equal(ok.outcome, 'signed-in');
        for (let i = 0; i < 4; i += 1) {
          const result = await first.attempt(ctx.db, {
            email: user.email,
            password: 'wrong',
            address: from(12),
          });
          assert.equal(result.outcome, 'incorrect', `failure ${i + 1} after a success is still checked`);
        }
      } finally {
        for (const connection of connections) connection.disconnect();
      }
    });

    test('Redis stops answering in the middle of a run of guesses: what it counted and what it missed are one count, 5 passwords checked in all', async () => {
      // A Redis of this test's own, frozen half-way (SIGSTOP), so the shared one is never touched.
      const own = await startRedis();
      const connection = openRedis(own.url);
      try {
        assert.equal(await redisReady(connection), true);
        const signIn = SignIn.create(connection);
        const user = await seedUser(ctx.db, accountId);
        const guess = async (i: number) =>
          (
            await signIn.attempt(ctx.db, {
              email: user.email,
              password: `wrong ${i}`,
              address: `198.51.100.${i}-${randomUUID().slice(0, 8)}`,
            })
          ).outcome;
        for (let i = 0; i < 3; i += 1)
          assert.equal(await guess(i), 'incorrect', `guess ${i + 1}, Redis answering`);
        own.process.kill('SIGSTOP');
        // Past Redis's deadline the instance's own count decides, and it has seen the first three.
        const outcomes: string[] = [];
        for (let i = 3; i < 8; i += 1) outcomes.push(await guess(i));
        assert.deepEqual(outcomes, ['incorrect', 'incorrect', 'throttled', 'throttled', 'throttled']);
      } finally {
        own.process.kill('SIGCONT');
        connection.disconnect();
        await own.stop();
      }
    });
  });
}
