import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Migrator, sql } from 'kysely';
import { openDatabase } from '../../src/db/database.ts';
import { migrations } from '../../src/db/migrate.ts';
import { webhookRepository } from '../../src/db/repositories/webhooks.ts';
import { secretBoxOf } from '../../src/services/webhook-secret-box.ts';
import { MAX_PREVIOUS_SECRETS } from '../../src/services/webhook-service.ts';
import { generateSecret } from '../../src/webhooks/signing.ts';
import { createTestContext, createTestDatabase, STORES, seedAccount, type TestContext } from '../helpers.ts';

/**
 * A list of previous signing secrets, each with its own expiry (issue 41, "rotation"; migration
 * 0011_webhook_previous_secrets), beside the one previous secret the release before keeps: which
 * secrets sign after rotations by this release, by the release before during a rolling upgrade,
 * and on rows from before the migration. Deliveries signed with them: test/webhooks/delivery.test.ts.
 */

const HOUR = 3_600_000;

for (const store of STORES) {
  describe(`previous signing secrets (${store})`, () => {
    let ctx: TestContext;
    before(async () => {
      ctx = await createTestContext(store, { WEBHOOKS_ALLOW_PRIVATE: 'true' });
    });
    after(() => ctx.close());

    const webhooks = () => ctx.runtime.services.webhooks;
    async function endpoint(): Promise<{ id: string; secret: string }> {
      const accountId = await seedAccount(ctx.db);
      const created = await webhooks().create({
        accountId,
        url: 'http://127.0.0.1:9/hook',
        actor: 'test',
      });
      return { id: created.endpoint.id, secret: created.secret };
    }
    const signing = async (id: string, at = new Date()) => {
      const row = await webhookRepository.findById(ctx.db, id);
      assert.ok(row !== undefined);
      return webhooks().signingSecrets(row, at);
    };
    const rotate = async (id: string, overlapHours: number) =>
      (await webhooks().rotateSecret(id, 'test', { overlapHours })).secret;

    test('every previous secret signs until its own expiry, newest first; an overlap of 0 ends them all', async () => {
      const { id, secret: first } = await endpoint();
      const second = await rotate(id, 3);
      const third = await rotate(id, 1);
      const current = await rotate(id, 2);
      assert.deepEqual(await signing(id), [current, third, second, first]);
      // Each ends at its own expiry, whatever the order of the rotations: the second's (1 h) first,
      // then the third's (2 h), then the first's (3 h).
      const now = Date.now();
      assert.deepEqual(await signing(id, new Date(now + 1.5 * HOUR)), [current, third, first]);
      assert.deepEqual(await signing(id, new Date(now + 2.5 * HOUR)), [current, first]);
      assert.deepEqual(await signing(id, new Date(now + 3.5 * HOUR)), [current]);

      const shown = await ctx.runtime.services.webhooks.show(id);
      assert.equal(shown.previous_secrets_expire_at.length, 3);
      assert.equal(shown.previous_secret_expires_at, shown.previous_secrets_expire_at.at(-1));

      const leaked = await rotate(id, 0);
      assert.deepEqual(await signing(id), [leaked]);
      const view = await ctx.runtime.services.webhooks.show(id);
      assert.deepEqual([view.previous_secret_expires_at, view.previous_secrets_expire_at], [null, []]);
    });

    test(`at most ${MAX_PREVIOUS_SECRETS} previous secrets: one more rotation ends the one that expires soonest`, async () => {
      const { id, secret: first } = await endpoint();
      // The first secret gets the shortest overlap: it is the one that goes.
      const secrets = [first, await rotate(id, 1)];
      for (let i = 1; i < MAX_PREVIOUS_SECRETS; i += 1) secrets.push(await rotate(id, 5));
      assert.equal((await signing(id)).length, MAX_PREVIOUS_SECRETS + 1);
      const current = await rotate(id, 5);
      const signed = await signing(id);
      assert.equal(signed.length, MAX_PREVIOUS_SECRETS + 1);
      assert.deepEqual(signed, [current, ...secrets.slice(2).reverse(), secrets[1]]);
      assert.ok(!signed.includes(first));
    });

    test('a rolling upgrade: a rotation by the release before leaves the list aside and its one previous secret signs; its overlap of 0 ends them all', async () => {
      const { id, secret: first } = await endpoint();
      const second = await rotate(id, 2);
      const third = await rotate(id, 2);
      assert.deepEqual(await signing(id), [third, second, first]);

      // The release before rotates as it did: the current secret becomes `previous_secret`, and
      // the list it does not know stays as it was.
      const box = await secretBoxOf(ctx.db, null)();
      const byOldRelease = generateSecret();
      const row = await webhookRepository.findById(ctx.db, id);
      assert.ok(row !== undefined);
      const until = new Date(Date.now() + HOUR).toISOString();
      await webhookRepository.update(ctx.db, id, {
        secret: box.seal(id, byOldRelease),
        previous_secret: row.secret,
        previous_secret_expires_at: until,
        updated_at: until,
      });
      assert.deepEqual(await signing(id), [byOldRelease, third]);
      assert.deepEqual((await ctx.runtime.services.webhooks.show(id)).previous_secrets_expire_at, [until]);

      // The next rotation by this release starts the list again from what signed.
      const next = await rotate(id, 2);
      assert.deepEqual(await signing(id), [next, byOldRelease, third]);

      // The release before rotates with no overlap: nothing but its new secret signs.
      const alone = generateSecret();
      await webhookRepository.update(ctx.db, id, {
        secret: box.seal(id, alone),
        previous_secret: null,
        previous_secret_expires_at: null,
        updated_at: until,
      });
      assert.deepEqual(await signing(id), [alone]);
    });
  });

  describe(`migration 0011_webhook_previous_secrets (${store})`, () => {
    test('additive: existing endpoints keep their one previous secret; down removes the list', async () => {
      const database = await createTestDatabase(store);
      const handle = openDatabase(database.url);
      const { db } = handle;
      const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
      try {
        assert.equal((await migrator.migrateTo('0010_webhook_acknowledged')).error, undefined);
        assert.equal(migrations['0011_webhook_previous_secrets']?.additive, true);
        const accountId = await seedAccount(db);
        const stamp = '2026-01-01T00:00:00.000Z';
        await sql`insert into webhook_endpoints
            (id, account_id, url, events, state, secret, previous_secret, previous_secret_expires_at,
             position, known_through, failed_attempts, created_by, created_at, updated_at)
          values ('e1', ${accountId}, 'https://bi.example.com/hook', '["*"]', 'active', 'sealed-current',
            'sealed-previous', '2026-01-02T00:00:00.000Z', 3, 3, 0, 'test', ${stamp}, ${stamp})`.execute(db);

        const up = await migrator.migrateTo('0011_webhook_previous_secrets');
        assert.equal(up.error, undefined);
        assert.deepEqual(
          await db
            .selectFrom('webhook_endpoints')
            .select(['id', 'secret', 'previous_secret', 'previous_secret_expires_at', 'previous_secrets'])
            .execute(),
          [
            {
              id: 'e1',
              secret: 'sealed-current',
              previous_secret: 'sealed-previous',
              previous_secret_expires_at: '2026-01-02T00:00:00.000Z',
              previous_secrets: null,
            },
          ],
        );

        const down = await migrator.migrateTo('0010_webhook_acknowledged');
        assert.equal(down.error, undefined);
        const { rows } = await sql<Record<string, unknown>>`select * from webhook_endpoints`.execute(db);
        assert.equal(rows.length, 1);
        assert.ok(!('previous_secrets' in (rows[0] ?? {})));
      } finally {
        await handle.destroy();
        await database.drop();
      }
    });
  });
}
