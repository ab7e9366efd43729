import assert from 'node:assert/strict';
import { after, before, describe, mock, test } from 'node:test';
import { apiKeyService } from '../../src/services/api-key-service.ts';
import { auditRepository } from '../../src/db/repositories/audit-events.ts';
import {
  bearer,
  createSecondInstance,
  createTestContext,
  REDIS_URL,
  STORES,
  seedAccount,
  seedKey,
  type TestContext,
} from '../helpers.ts';

const OVERLAP_LEFT_MS = 1500;

for (const store of STORES) {
  // PostgreSQL with Redis: the rows are kept under the shared generation, the path most likely to
  // serve a row read before the roll; SQLite: under the commit watch.
  describe(`a rolled key stops exactly at its chosen time, on every instance (${store})`, () => {
    let ctx: TestContext;
    let second: Awaited<ReturnType<typeof createSecondInstance>>;

    before(async () => {
      ctx = await createTestContext(store, store === 'postgres' ? { REDIS_URL } : {});
      second = await createSecondInstance(ctx);
    });
    after(async () => {
      await second.close();
      await ctx.close();
    });

    const status = async (app: TestContext['app'], rawKey: string) =>
      (await app.inject({ method: 'GET', url: '/api/v1/public/incidents', headers: bearer(rawKey) }))
        .statusCode;

    test('both keys work during the overlap; the old one stops at its expiry, not before', async () => {
      const accountId = await seedAccount(ctx.db);
      const old = await seedKey(ctx.db, accountId, { name: 'Warehouse', scope: 'read-write' });
      // Both instances have read (and may keep) the old key's row before the roll.
      assert.equal(await status(ctx.app, old.rawKey), 200);
      assert.equal(await status(second.app, old.rawKey), 200);

      // The instances' clock is held, so "until its time" is judged to the millisecond however
      // long the requests take on a busy machine.
      mock.timers.enable({ apis: ['Date'], now: Date.now() });
      try {
        // Rolled "an hour ago" with a 1 h overlap: the old key has OVERLAP_LEFT_MS to live.
        const rolledAt = new Date(Date.now() - 3600_000 + OVERLAP_LEFT_MS);
        const { key, rawKey, previous } = await apiKeyService.roll(
          ctx.db,
          old.id,
          '1h',
          'cli',
          accountId,
          rolledAt,
        );
        // What the panel and the CLI do after their commit (PostgreSQL with Redis).
        await ctx.runtime.sharedGeneration?.bump();
        const expiresAt = Date.parse(previous.expires_at ?? '');
        assert.equal(expiresAt, rolledAt.getTime() + 3600_000);
        assert.equal(key.scope, 'read-write');
        assert.equal(key.rolled_from, old.id);

        for (const app of [ctx.app, second.app]) {
          assert.equal(await status(app, rawKey), 200, 'the successor works at once');
          assert.equal(await status(app, old.rawKey), 200, 'the old key until its time');
        }
        mock.timers.tick(OVERLAP_LEFT_MS - 1);
        for (const app of [ctx.app, second.app]) {
          assert.equal(await status(app, old.rawKey), 200, 'a millisecond before its time');
        }
        mock.timers.tick(1);
        assert.equal(Date.now(), expiresAt);
        for (const app of [ctx.app, second.app]) {
          assert.equal(await status(app, old.rawKey), 401, 'and not at its time');
          assert.equal(await status(app, rawKey), 200);
        }

        const events = await auditRepository.list(ctx.db, accountId, 10, { type: 'api_key' });
        assert.deepEqual(
          events.slice(0, 2).map((event) => [event.subject_id, event.action, event.actor]),
          [
            [key.id, 'created_by_roll', 'cli'],
            [old.id, 'rolled', 'cli'],
          ],
        );
      } finally {
        mock.timers.reset();
      }
    });

    test('a roll never extends a key: an earlier expiry stays', async () => {
      const accountId = await seedAccount(ctx.db);
      const soon = new Date(Date.now() + 3600_000).toISOString();
      const old = await seedKey(ctx.db, accountId, { expiresAt: soon });
      const { key, previous } = await apiKeyService.roll(ctx.db, old.id, '7d', 'cli', accountId);
      assert.equal(previous.expires_at, soon);
      assert.equal(key.expires_at, soon, 'the successor keeps the expiry the key had');
    });

    test('only an active key of the account can be rolled; a refused roll changes nothing', async () => {
      const accountId = await seedAccount(ctx.db);
      const other = await seedAccount(ctx.db);
      const key = await seedKey(ctx.db, accountId);
      await assert.rejects(apiKeyService.roll(ctx.db, key.id, '1h', 'cli', other), /no API key with id/);
      await apiKeyService.revoke(ctx.db, key.id, 'cli');
      await assert.rejects(
        apiKeyService.roll(ctx.db, key.id, '1h', 'cli'),
        /only an active key can be rolled \(this one is revoked\)/,
      );
      assert.equal((await apiKeyService.list(ctx.db, accountId)).length, 1);
    });
  });
}
