import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { type OwnRedis, startRedis } from '../faults/harness.ts';
import { spyOnScrypt } from '../auth/scrypt-spy.ts';
import { STORES, seedAccount } from '../helpers.ts';
import { AdminClient } from '../routes/admin/admin-helpers.ts';
import {
  authorizationRequest,
  Browser,
  discover,
  formsOf,
  type HtmlForm,
  type OauthServer,
  PASSWORD,
  seedClient,
  seedUser,
  startOauthServer,
} from './harness.ts';

/**
 * Concurrent guesses against the OAuth sign-in page, and the one count it shares with the admin
 * panel's form: at most 5 passwords of one email are checked in 15 minutes, whichever form and
 * however many requests arrive at once.
 */

const tally = (statuses: number[]) => {
  const counts = new Map<number, number>();
  for (const status of statuses) counts.set(status, (counts.get(status) ?? 0) + 1);
  return counts;
};

for (const store of STORES) {
  for (const counting of ['memory', 'redis'] as const) {
    describe(`OAuth sign-in under concurrent guesses (${store}, counts in ${counting})`, () => {
      let server: OauthServer;
      let redis: OwnRedis | undefined;
      let accountId: string;
      let client: { clientId: string; clientSecret: string | null };

      before(async () => {
        redis = counting === 'redis' ? await startRedis() : undefined;
        server = await startOauthServer(store, redis === undefined ? {} : { REDIS_URL: redis.url });
        accountId = await seedAccount(server.ctx.db);
        client = await seedClient(server.ctx.db, accountId);
      });
      after(async () => {
        await server.close();
        await redis?.stop();
      });

      /** A browser at the sign-in page of a fresh authorization request, and the page's form. */
      async function signInPage(): Promise<{ browser: Browser; form: HtmlForm }> {
        const config = await discover(server, client.clientId, client.clientSecret);
        const { url } = await authorizationRequest(config, { scope: 'openid profile' });
        const browser = new Browser(server.baseUrl);
        const page = await browser.follow(url.href);
        assert.equal(page.response.status, 200);
        const [form] = formsOf(await page.response.text());
        assert.ok(form);
        return { browser, form };
      }

      async function guessAtOnce(email: string, passwords: string[]): Promise<number[]> {
        const { browser, form } = await signInPage();
        const responses = await Promise.all(
          passwords.map((password) => browser.request(form.action, { ...form.fields, email, password })),
        );
        await Promise.all(responses.map((res) => res.arrayBuffer()));
        return responses.map((res) => res.status);
      }

      // First: every attempt of this file comes from 127.0.0.1, and the bursts below may use up
      // that address's own allowance of 20.
      test('the admin form and the OAuth form share one count per email', async () => {
        const net = randomInt(1, 250);
        // Five failures on the admin panel lock the email on the OAuth page, right password or not.
        const first = await seedUser(server.ctx.db, accountId);
        for (let i = 1; i <= 5; i++) {
          const res = await new AdminClient(server.ctx.app, `10.${net}.0.${i}`).signIn(
            first.email,
            `wrong ${i}`,
          );
          assert.equal(res.statusCode, 401);
        }
        const [locked] = await guessAtOnce(first.email, [PASSWORD]);
        assert.equal(locked, 429);

        // And five failures on the OAuth page lock the email on the admin panel.
        const second = await seedUser(server.ctx.db, accountId, { role: 'super_admin' });
        for (let i = 1; i <= 5; i++) {
          const [status] = await guessAtOnce(second.email, [`wrong ${i}`]);
          assert.equal(status, 401);
        }
        const admin = await new AdminClient(server.ctx.app, `10.${net}.1.1`).signIn(second.email, PASSWORD);
        assert.equal(admin.statusCode, 429);
        assert.match(admin.body, /Too many failed sign-in attempts/);
      });

      test('40 concurrent wrong passwords: at most 5 are checked (401), the rest get 429', async () => {
        const user = await seedUser(server.ctx.db, accountId);
        const scrypt = spyOnScrypt();
        let statuses: number[];
        try {
          statuses = await guessAtOnce(
            user.email,
            Array.from({ length: 40 }, (_, i) => `wrong guess ${i}`),
          );
        } finally {
          scrypt.restore();
        }
        const counts = tally(statuses);
        const wrong = counts.get(401) ?? 0;
        assert.ok(wrong >= 1 && wrong <= 5, `401 answers: ${wrong}`);
        assert.equal(counts.get(429), 40 - wrong, JSON.stringify([...counts]));
        assert.ok(scrypt.calls() <= 5, `scrypt ran ${scrypt.calls()} times`);
      });

      test('60 concurrent guesses with the right password last: it is never checked', async () => {
        const user = await seedUser(server.ctx.db, accountId);
        const passwords = Array.from({ length: 60 }, (_, i) => `wrong guess ${i}`);
        passwords[59] = PASSWORD;
        const scrypt = spyOnScrypt();
        let statuses: number[];
        try {
          statuses = await guessAtOnce(user.email, passwords);
        } finally {
          scrypt.restore();
        }
        const counts = tally(statuses);
        const wrong = counts.get(401) ?? 0;
        assert.ok(wrong <= 5, `401 answers: ${wrong}`);
        assert.equal(counts.get(429), 60 - wrong, JSON.stringify([...counts]));
        assert.equal(statuses[59], 429, 'the right password is refused unchecked');
        assert.ok(scrypt.calls() <= 5, `scrypt ran ${scrypt.calls()} times`);
      });
    });
  }
}
