import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { createTestContext, STORES, seedAccount, type TestContext } from '../helpers.ts';
import { seedUser } from '../routes/admin/admin-helpers.ts';
import { type Smtp, startSmtp } from '../smtp.ts';
import { until } from '../wait.ts';
import { importRecords, incident } from './feed.ts';
import { Receiver } from './receiver.ts';

/**
 * The delivery tells the account's Super Admins through the mail service: one mail when an endpoint
 * is disabled, one per failure episode once it has failed for an hour, whatever the attempts.
 */
for (const store of STORES) {
  describe(`webhook delivery mails Super Admins (${store})`, () => {
    let smtp: Smtp;
    let ctx: TestContext;
    let receiver: Receiver;
    let accountId: string;
    let admin: string;

    before(async () => {
      smtp = await startSmtp();
      ctx = await createTestContext(store, {
        WEBHOOKS_ALLOW_PRIVATE: 'true',
        WEBHOOK_TIMEOUT_MS: '2000',
        SMTP_URL: smtp.url,
        BASE_URL: 'https://api.example.test',
      });
      await ctx.runtime.delivery.start();
    });
    after(async () => {
      await ctx.close();
      await smtp.close();
    });
    beforeEach(async () => {
      receiver = await Receiver.start();
      accountId = await seedAccount(ctx.db);
      admin = (await seedUser(ctx.db, accountId)).email;
    });
    afterEach(() => receiver.close());

    const mailsTo = (email: string) => smtp.received.filter((mail) => mail.to.includes(email));
    const show = (id: string) => ctx.runtime.services.webhooks.show(id);

    test('a 410 disables the endpoint: one mail', async () => {
      receiver.answer = (_r, response) => {
        response.statusCode = 410;
        response.end();
      };
      const { endpoint } = await ctx.runtime.services.webhooks.create({
        accountId,
        url: receiver.url(),
        actor: 'test',
      });
      await importRecords(ctx, [incident(accountId, randomUUID(), 1), incident(accountId, randomUUID(), 2)]);
      await until(async () => (await show(endpoint.id)).state === 'disabled', 60_000, 'disabled');
      await until(() => mailsTo(admin).length > 0, 60_000, 'the mail');
      await ctx.runtime.mail?.idle();
      const mails = mailsTo(admin);
      assert.equal(mails.length, 1);
      assert.match(mails[0]?.subject ?? '', /^Webhook endpoint disabled: http:\/\/127\.0\.0\.1:\d+\//);
      assert.match(mails[0]?.text ?? '', /the receiver answered 410 Gone/);
    });

    test('failing for an hour: one mail for the episode, not one per attempt', async () => {
      receiver.answer = (_r, response) => {
        response.statusCode = 500;
        response.end();
      };
      const { endpoint } = await ctx.runtime.services.webhooks.create({
        accountId,
        url: receiver.url(),
        actor: 'test',
      });
      // The failure began two hours ago (the clock the rule reads is the attempt's).
      const since = new Date(Date.now() - 2 * 3_600_000).toISOString();
      await ctx.db
        .updateTable('webhook_endpoints')
        .set({ failing_since: since, failed_attempts: 1 })
        .where('id', '=', endpoint.id)
        .execute();
      await importRecords(ctx, [incident(accountId, randomUUID(), 1)]);
      await until(() => mailsTo(admin).length > 0, 60_000, 'the mail');
      // Two more attempts, each brought forward instead of waiting minutes for the retry: the retry
      // made due, and a new change that wakes the account's worker.
      for (const attempts of [2, 3]) {
        await ctx.db
          .updateTable('webhook_endpoints')
          .set({ next_attempt_at: new Date().toISOString() })
          .where('id', '=', endpoint.id)
          .execute();
        await importRecords(ctx, [incident(accountId, randomUUID(), attempts)]);
        await until(
          async () => (await show(endpoint.id)).attempts.length >= attempts,
          60_000,
          `attempt ${attempts}`,
        );
      }
      await ctx.runtime.mail?.idle();
      const mails = mailsTo(admin);
      assert.equal(mails.length, 1);
      assert.match(mails[0]?.subject ?? '', /^Webhook endpoint failing: /);
      assert.ok(mails[0]?.text.includes(`has failed since ${since}`));
    });
  });
}
