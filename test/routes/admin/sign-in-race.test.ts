import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { type OwnRedis, startRedis } from '../../faults/harness.ts';
import { spyOnScrypt } from '../../auth/scrypt-spy.ts';
import { createTestContext, STORES, seedAccount, type TestContext } from '../../helpers.ts';
import { AdminClient, csrfTokenOf, PASSWORD, seedUser } from './admin-helpers.ts';

/**
 * Concurrent guesses against the admin sign-in form: each attempt is counted before its password
 * is checked, so however many arrive at once, at most 5 passwords of one email are checked.
 */

const statusCounts = (responses: LightMyRequestResponse[]) => {
  const counts = new Map<number, number>();
  for (const res of responses) counts.set(res.statusCode, (counts.get(res.statusCode) ?? 0) + 1);
  return counts;
};

for (const store of STORES) {
  for (const counting of ['memory', 'redis'] as const) {
    describe(`admin sign-in under concurrent guesses (${store}, counts in ${counting})`, () => {
      let ctx: TestContext;
      let redis: OwnRedis | undefined;
      let accountId: string;

      before(async () => {
        redis = counting === 'redis' ? await startRedis() : undefined;
        ctx = await createTestContext(store, redis === undefined ? {} : { REDIS_URL: redis.url });
        accountId = await seedAccount(ctx.db);
      });
      after(async () => {
        await ctx.close();
        await redis?.stop();
      });

      /** `count` posts at once, each from its own address, all for `email`. */
      async function guessAtOnce(email: string, passwords: string[]): Promise<LightMyRequestResponse[]> {
        const browser = new AdminClient(ctx.app);
        const form = await browser.get('/admin/sign-in');
        const token = csrfTokenOf(form.body);
        const net = randomInt(1, 250);
        return Promise.all(
          passwords.map((password, i) =>
            ctx.app.inject({
              method: 'POST',
              url: '/admin/sign-in',
              cookies: Object.fromEntries(browser.cookies),
              remoteAddress: `10.${net}.${i >> 8}.${i & 255}`,
              headers: { 'content-type': 'application/x-www-form-urlencoded' },
              payload: new URLSearchParams({ _csrf: token, email, password }).toString(),
            }),
          ),
        );
      }

      test('40 concurrent wrong passwords: at most 5 are checked (401), the rest get 429', async () => {
        const user = await seedUser(ctx.db, accountId);
        const scrypt = spyOnScrypt();
        let responses: LightMyRequestResponse[];
        try {
          responses = await guessAtOnce(
            user.email,
            Array.from({ length: 40 }, (_, i) => `wrong guess ${i}`),
          );
        } finally {
          scrypt.restore();
        }
        const counts = statusCounts(responses);
        const wrong = counts.get(401) ?? 0;
        assert.ok(wrong >= 1 && wrong <= 5, `401 answers: ${wrong}`);
        assert.equal(counts.get(429), 40 - wrong, JSON.stringify([...counts]));
        assert.ok(scrypt.calls() <= 5, `scrypt ran ${scrypt.calls()} times`);
        for (const res of responses.filter((r) => r.statusCode === 429)) {
          const wait = Number(res.headers['retry-after']);
          assert.ok(wait >= 1 && wait <= 900, `Retry-After ${wait}`);
        }
      });

      test('60 concurrent guesses with the right password among them: it is never checked', async () => {
        const user = await seedUser(ctx.db, accountId);
        const passwords = Array.from({ length: 60 }, (_, i) => `wrong guess ${i}`);
        passwords[59] = PASSWORD;
        const scrypt = spyOnScrypt();
        let responses: LightMyRequestResponse[];
        try {
          responses = await guessAtOnce(user.email, passwords);
        } finally {
          scrypt.restore();
        }
        const counts = statusCounts(responses);
        const wrong = counts.get(401) ?? 0;
        assert.ok(wrong <= 5, `401 answers: ${wrong}`);
        assert.equal(counts.get(429), 60 - wrong, JSON.stringify([...counts]));
        assert.equal(counts.get(303), undefined, 'nobody is signed in');
        assert.ok(scrypt.calls() <= 5, `scrypt ran ${scrypt.calls()} times`);
        const sessions = await ctx.db
          .selectFrom('admin_sessions')
          .select('id_hash')
          .where('user_id', '=', user.id)
          .execute();
        assert.equal(sessions.length, 0);
      });
    });
  }
}
