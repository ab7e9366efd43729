import assert from 'node:assert/strict';
import { setImmediate as tick } from 'node:timers/promises';
import { after, before, describe, mock, test } from 'node:test';
import { KeyUsageRecorder, usageClass } from '../../src/auth/key-usage.ts';
import { keyUsageRepository } from '../../src/db/repositories/key-usage.ts';
import { keyUsageService } from '../../src/services/key-usage-service.ts';
import {
  bearer,
  createSecondInstance,
  createTestContext,
  STORES,
  seedAccount,
  seedKey,
  startServer,
  type TestContext,
} from '../helpers.ts';

const HOUR_MS = 3600 * 1000;

test('answers are classed as docs/design.md says: 2xx and 304, 4xx but 429, 429; 5xx not at all', () => {
  assert.deepEqual([200, 204, 304, 400, 401, 403, 404, 405, 429, 500, 503, 301].map(usageClass), [
    'ok',
    'ok',
    'ok',
    'client_errors',
    'client_errors',
    'client_errors',
    'client_errors',
    'client_errors',
    'rate_limited',
    null,
    null,
    null,
  ]);
});

for (const store of STORES) {
  describe(`key usage (${store})`, () => {
    let ctx: TestContext;

    before(async () => {
      // The recorders' periodic flush (every 10 s) never fires here: each test flushes when its
      // subject says so, and "nothing written before the flush" cannot meet a timer on a busy machine.
      mock.timers.enable({ apis: ['setInterval'] });
      ctx = await createTestContext(store);
    });
    after(async () => {
      await ctx.close();
      mock.timers.reset();
    });

    const get = (app: TestContext['app'], rawKey: string, url = '/api/v1/public/incidents') =>
      app.inject({ method: 'GET', url, headers: bearer(rawKey) });

    test('the counts equal the requests made, by class, with nothing written before the flush', async () => {
      const accountId = await seedAccount(ctx.db, { rate_limit_per_hour: 4 });
      const key = await seedKey(ctx.db, accountId);
      const hourOf = (ms: number) => new Date(ms - (ms % HOUR_MS)).toISOString();
      const firstHour = hourOf(Date.now());
      const statuses = [];
      for (let i = 0; i < 3; i += 1) statuses.push((await get(ctx.app, key.rawKey)).statusCode);
      statuses.push((await get(ctx.app, key.rawKey, '/api/v1/public/incidents/no-such-incident')).statusCode);
      for (let i = 0; i < 2; i += 1) statuses.push((await get(ctx.app, key.rawKey)).statusCode);
      assert.deepEqual(statuses, [200, 200, 200, 404, 429, 429]);
      // An unknown key and a missing header are no key's usage.
      await get(ctx.app, `svc_${'0'.repeat(40)}`);
      await tick();

      assert.deepEqual((await keyUsageService.report(ctx.db, key.id, 30)).hours, [], 'no write per request');
      await ctx.runtime.keyUsage.flush();
      const report = await keyUsageService.report(ctx.db, key.id, 30);
      assert.deepEqual(report.totals, { ok: 3, client_errors: 1, rate_limited: 2 });
      const lastHour = hourOf(Date.now());
      if (firstHour === lastHour) {
        assert.deepEqual(
          report.hours.map(({ hour }) => hour),
          [firstHour],
        );
      } else {
        // The requests straddled the end of an hour: each is in the hour it was made in.
        assert.ok(report.hours.every(({ hour }) => hour === firstHour || hour === lastHour));
      }
    });

    test('an expired or disabled key is still counted for its key, as client errors', async () => {
      const accountId = await seedAccount(ctx.db);
      const key = await seedKey(ctx.db, accountId);
      await ctx.db.updateTable('api_keys').set({ state: 'disabled' }).where('id', '=', key.id).execute();
      assert.equal((await get(ctx.app, key.rawKey)).statusCode, 401);
      await tick();
      await ctx.runtime.keyUsage.flush();
      assert.deepEqual((await keyUsageService.report(ctx.db, key.id, 1)).totals, {
        ok: 0,
        client_errors: 1,
        rate_limited: 0,
      });
    });

    test('two instances on one database: each flushes, the rows are the sum', async () => {
      const accountId = await seedAccount(ctx.db);
      const key = await seedKey(ctx.db, accountId);
      const second = await createSecondInstance(ctx);
      try {
        for (let i = 0; i < 5; i += 1) assert.equal((await get(ctx.app, key.rawKey)).statusCode, 200);
        for (let i = 0; i < 7; i += 1) assert.equal((await get(second.app, key.rawKey)).statusCode, 200);
        await tick();
        await ctx.runtime.keyUsage.flush();
        await second.runtime.keyUsage.flush();
        // A second flush of each adds nothing more.
        await ctx.runtime.keyUsage.flush();
        assert.equal((await get(second.app, key.rawKey)).statusCode, 200);
      } finally {
        // Closing flushes what is left (the server's shutdown path).
        await second.close();
      }
      assert.deepEqual((await keyUsageService.report(ctx.db, key.id, 30)).totals, {
        ok: 13,
        client_errors: 0,
        rate_limited: 0,
      });
    });

    test('the real server writes the counts it still holds when it stops (SIGTERM)', async () => {
      const accountId = await seedAccount(ctx.db);
      const key = await seedKey(ctx.db, accountId);
      const server = await startServer({ DATABASE_URL: ctx.databaseUrl });
      try {
        for (let i = 0; i < 3; i += 1) {
          const res = await fetch(`${server.url}/api/v1/public/incidents`, { headers: bearer(key.rawKey) });
          assert.equal(res.status, 200);
        }
      } finally {
        assert.equal(await server.stop(), 0);
      }
      // Well within the 10 s flush interval: only the shutdown can have written them.
      assert.equal((await keyUsageService.report(ctx.db, key.id, 1)).totals.ok, 3);
    });

    test('hour boundaries: the last millisecond of an hour and the first of the next are two rows', async () => {
      const accountId = await seedAccount(ctx.db);
      const key = await seedKey(ctx.db, accountId);
      const now = Date.now();
      const boundary = now - (now % HOUR_MS) - 2 * HOUR_MS;
      const recorder = new KeyUsageRecorder(ctx.db, (error) => assert.fail(String(error)), {
        now: () => now,
      });
      recorder.record(key.id, 200, boundary - 1);
      recorder.record(key.id, 429, boundary - 1);
      recorder.record(key.id, 304, boundary);
      recorder.record(key.id, 404, boundary + HOUR_MS - 1);
      recorder.record(key.id, 500, boundary);
      await recorder.close();
      const report = await keyUsageService.report(ctx.db, key.id, 1, new Date(now));
      assert.deepEqual(report.hours, [
        { hour: new Date(boundary - HOUR_MS).toISOString(), ok: 1, client_errors: 0, rate_limited: 1 },
        { hour: new Date(boundary).toISOString(), ok: 1, client_errors: 1, rate_limited: 0 },
      ]);
      // The page's view: one slot per hour of the 30 days, the current one last.
      const summary = await keyUsageService.summary(ctx.db, key.id, new Date(now));
      assert.equal(summary.hours.length, 30 * 24);
      assert.equal(summary.hours.at(-1)?.hour, new Date(now - (now % HOUR_MS)).toISOString());
      assert.deepEqual(summary.totals.day, { ok: 2, client_errors: 1, rate_limited: 1 });
    });

    test('a failed flush keeps its counts for the next one', async () => {
      const accountId = await seedAccount(ctx.db);
      const key = await seedKey(ctx.db, accountId);
      const errors: unknown[] = [];
      const recorder = new KeyUsageRecorder(ctx.db, (error) => errors.push(error));
      recorder.record(key.id, 200, Date.now());
      await ctx.db.schema.alterTable('key_usage').renameTo('key_usage_away').execute();
      try {
        await recorder.flush();
      } finally {
        await ctx.db.schema.alterTable('key_usage_away').renameTo('key_usage').execute();
      }
      assert.equal(errors.length, 1);
      recorder.record(key.id, 200, Date.now());
      await recorder.close();
      assert.equal((await keyUsageService.report(ctx.db, key.id, 1)).totals.ok, 2);
    });

    test('rows older than 30 days are purged by a flush', async () => {
      const accountId = await seedAccount(ctx.db);
      const key = await seedKey(ctx.db, accountId);
      const now = Date.now();
      const hourAgo = (hours: number) => new Date(now - (now % HOUR_MS) - hours * HOUR_MS).toISOString();
      await keyUsageRepository.add(ctx.db, [
        { key_id: key.id, hour: hourAgo(30 * 24 + 1), ok: 5, client_errors: 0, rate_limited: 0 },
        { key_id: key.id, hour: hourAgo(30 * 24 - 1), ok: 7, client_errors: 0, rate_limited: 0 },
      ]);
      const recorder = new KeyUsageRecorder(ctx.db, (error) => assert.fail(String(error)), {
        now: () => now,
      });
      await recorder.close();
      const rows = await ctx.db
        .selectFrom('key_usage')
        .select(['hour', 'ok'])
        .where('key_id', '=', key.id)
        .execute();
      assert.deepEqual(
        rows.map((row) => [row.hour, Number(row.ok)]),
        [[hourAgo(30 * 24 - 1), 7]],
      );
    });
  });
}
