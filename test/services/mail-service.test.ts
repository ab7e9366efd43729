import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MailService } from '../../src/services/mail-service.ts';
import {
  createSecondInstance,
  createTestContext,
  STORES,
  seedAccount,
  seedKey,
  type TestContext,
} from '../helpers.ts';
import { AdminClient, seedUser } from '../routes/admin/admin-helpers.ts';
import { type Smtp, startSmtp } from '../smtp.ts';

const BASE_URL = 'https://api.example.test';
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

function mailOf(services: { mail: MailService | null }): MailService {
  assert.ok(services.mail !== null, 'SMTP_URL is set: the mail service exists');
  return services.mail;
}

for (const store of STORES) {
  describe(`mail to Super Admins, two instances (${store})`, () => {
    let smtp: Smtp;
    let ctx: TestContext;
    let second: Awaited<ReturnType<typeof createSecondInstance>>;
    let accountId: string;
    let admins: string[];

    before(async () => {
      smtp = await startSmtp();
      ctx = await createTestContext(store, {
        SMTP_URL: smtp.url,
        BASE_URL,
        WEBHOOKS_ALLOW_PRIVATE: 'true',
      });
      second = await createSecondInstance(ctx);
      accountId = await seedAccount(ctx.db);
      admins = [(await seedUser(ctx.db, accountId)).email, (await seedUser(ctx.db, accountId)).email].sort();
      // Told nothing: another role, a deactivated Super Admin, vendor support.
      await seedUser(ctx.db, accountId, { role: 'admin' });
      await seedUser(ctx.db, accountId, { active: 0 });
      await seedUser(ctx.db, accountId, { vendor_support: 1 });
    });
    after(async () => {
      await second.close();
      await ctx.close();
      await smtp.close();
    });

    /** Both instances' mail services, each with every mail it started sent or failed. */
    const settled = () => Promise.all([mailOf(ctx.runtime).idle(), mailOf(second.runtime).idle()]);

    test('failing for an hour sends one mail per failure episode, not one per attempt', async () => {
      const before = smtp.received.length;
      const endpoint = {
        id: crypto.randomUUID(),
        account_id: accountId,
        url: 'https://hooks.example.test/in?token=s3cret',
      };
      const since = new Date('2026-03-01T10:00:00.000Z');
      const at = (minutes: number) => new Date(since.getTime() + minutes * 60_000);
      const failing = since.toISOString();
      // Attempts within the hour: nothing.
      mailOf(ctx.runtime).endpointFailing(endpoint, failing, at(5));
      mailOf(second.runtime).endpointFailing(endpoint, failing, at(59));
      await settled();
      assert.equal(smtp.received.length, before);
      // Attempts after it, on both instances, some at the same moment: one mail.
      for (const minutes of [60, 90, 150, 300]) {
        mailOf(ctx.runtime).endpointFailing(endpoint, failing, at(minutes));
        mailOf(second.runtime).endpointFailing(endpoint, failing, at(minutes));
      }
      await settled();
      const mails = smtp.received.slice(before);
      assert.equal(mails.length, 1);
      const [mail] = mails;
      assert.deepEqual(mail?.to, admins);
      assert.equal(mail?.subject, 'Webhook endpoint failing: https://hooks.example.test/in');
      assert.match(mail?.text ?? '', /has failed since 2026-03-01T10:00:00\.000Z/);
      assert.ok(mail?.text.includes(`${BASE_URL}/admin/settings/integrations/webhooks/${endpoint.id}`));
      assert.ok(!mail?.text.includes('s3cret'), 'no secret of the URL in the mail');

      // The endpoint recovered and failed again: a new episode, a new mail.
      const again = at(600).toISOString();
      mailOf(second.runtime).endpointFailing(endpoint, again, at(700));
      mailOf(ctx.runtime).endpointFailing(endpoint, again, at(700));
      await settled();
      assert.equal(smtp.received.length, before + 2);
    });

    test('disabling sends one mail, naming the endpoint and the reason', async () => {
      const before = smtp.received.length;
      const endpoint = {
        id: crypto.randomUUID(),
        account_id: accountId,
        url: 'https://hooks.example.test/gone',
      };
      const stamp = '2026-03-02T00:00:00.000Z';
      const reason = 'the receiver answered 410 Gone (2026-03-02T00:00:00.000Z)';
      mailOf(ctx.runtime).endpointDisabled(endpoint, reason, stamp);
      mailOf(second.runtime).endpointDisabled(endpoint, reason, stamp);
      await settled();
      const mails = smtp.received.slice(before);
      assert.equal(mails.length, 1);
      assert.equal(mails[0]?.subject, 'Webhook endpoint disabled: https://hooks.example.test/gone');
      assert.ok(mails[0]?.text.includes(reason));
      assert.ok(mails[0]?.text.includes(`${BASE_URL}/admin/settings/integrations/webhooks/${endpoint.id}`));
    });

    test('key expiry mails once per threshold, even with two instances looking at once', async () => {
      const before = smtp.received.length;
      const start = Date.now();
      const expiresAt = new Date(start + 3 * DAY_MS).toISOString();
      const { id, rawKey } = await seedKey(ctx.db, accountId, { name: 'Nightly export', expiresAt });
      const check = (offsetMs: number) =>
        Promise.all([
          mailOf(ctx.runtime).checkKeyExpiry(new Date(start + offsetMs)),
          mailOf(second.runtime).checkKeyExpiry(new Date(start + offsetMs)),
        ]);
      await check(0);
      await check(HOUR_MS);
      const week = smtp.received.slice(before).filter((mail) => mail.text.includes(id));
      assert.equal(week.length, 1);
      assert.equal(week[0]?.subject, 'API key expires in 7 days: Nightly export');
      assert.ok(week[0]?.text.includes(`${BASE_URL}/admin/settings/integrations/api-keys/${id}`));
      assert.ok(week[0]?.text.includes(expiresAt));
      assert.ok(!week[0]?.text.includes(rawKey), 'never the key itself');

      // A day before (and a little later): the second warning, once.
      await check(2 * DAY_MS + HOUR_MS);
      await check(2 * DAY_MS + 2 * HOUR_MS);
      // Expired: nothing more.
      await check(4 * DAY_MS);
      const all = smtp.received.slice(before).filter((mail) => mail.text.includes(id));
      assert.deepEqual(
        all.map((mail) => mail.subject),
        ['API key expires in 7 days: Nightly export', 'API key expires in 1 day: Nightly export'],
      );
    });

    test('a mail the SMTP server refuses is sent at the next occasion, once', async () => {
      const before = smtp.received.length;
      const start = Date.now();
      const expiresAt = new Date(start + 3 * DAY_MS).toISOString();
      const { id } = await seedKey(ctx.db, accountId, { name: 'Refused once', expiresAt });
      const mailsOfKey = () => smtp.received.slice(before).filter((mail) => mail.text.includes(id));
      const refusedBefore = smtp.refused;
      smtp.refuse(1);
      await mailOf(ctx.runtime).checkKeyExpiry(new Date(start));
      assert.equal(smtp.refused, refusedBefore + 1, 'the server was asked, and refused');
      assert.deepEqual(mailsOfKey(), []);
      // The claim was given back: the next look (either instance) sends it, and only it.
      await mailOf(second.runtime).checkKeyExpiry(new Date(start + HOUR_MS));
      await mailOf(ctx.runtime).checkKeyExpiry(new Date(start + 2 * HOUR_MS));
      assert.deepEqual(
        mailsOfKey().map((mail) => mail.subject),
        ['API key expires in 7 days: Refused once'],
      );
    });

    test('the panel shows a banner while an endpoint fails for an hour or is disabled', async () => {
      const bannerAccount = await seedAccount(ctx.db);
      const admin = await seedUser(ctx.db, bannerAccount);
      const { endpoint } = await ctx.runtime.services.webhooks.create({
        accountId: bannerAccount,
        url: 'http://127.0.0.1:9/hook',
        actor: 'cli',
      });
      const client = new AdminClient(ctx.app);
      assert.equal((await client.signIn(admin.email)).statusCode, 303);
      // Every page of the signed-in area shows it the same: two of them are read each time.
      const banner = async () => {
        const found = new Set<string | null>();
        for (const url of ['/admin/settings/integrations', '/admin/settings/integrations/audit']) {
          const page = await client.get(url);
          assert.equal(page.statusCode, 200, url);
          found.add(
            /<section class="flash flash-error webhook-alerts"[\s\S]*?<\/section>/.exec(page.body)?.[0] ??
              null,
          );
        }
        assert.equal(found.size, 1, 'the same banner on every page');
        return [...found][0] ?? null;
      };
      const setEndpoint = (patch: { failing_since: string | null; state: string }) =>
        ctx.db.updateTable('webhook_endpoints').set(patch).where('id', '=', endpoint.id).execute();

      assert.equal(await banner(), null, 'a healthy endpoint: no banner');
      await setEndpoint({ failing_since: new Date(Date.now() - 30 * 60_000).toISOString(), state: 'active' });
      assert.equal(await banner(), null, 'failing for half an hour: no banner yet');
      const since = new Date(Date.now() - 2 * HOUR_MS).toISOString();
      await setEndpoint({ failing_since: since, state: 'active' });
      const failing = await banner();
      assert.ok(failing?.includes(`href="/admin/settings/integrations/webhooks/${endpoint.id}"`));
      assert.ok(failing?.includes(`has failed every delivery since ${since}`));
      await setEndpoint({ failing_since: null, state: 'disabled' });
      assert.match((await banner()) ?? '', /is disabled/);
      await setEndpoint({ failing_since: null, state: 'active' });
      assert.equal(await banner(), null, 'recovered: the banner is gone');
    });
  });
}
