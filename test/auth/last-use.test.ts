import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { LastUseRecorder } from '../../src/auth/last-use.ts';
import { createTestContext, seedAccount, seedKey, type TestContext } from '../helpers.ts';

describe('last use recorder', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext('sqlite');
  });
  after(() => ctx.close());

  const lastUsed = async (id: string) =>
    (
      await ctx.db
        .selectFrom('api_keys')
        .select('last_used_at')
        .where('id', '=', id)
        .executeTakeFirstOrThrow()
    ).last_used_at;

  test('keeps uses it could not write and writes them at the next pass; never moves backwards', async () => {
    const accountId = await seedAccount(ctx.db);
    const key = await seedKey(ctx.db, accountId);
    const errors: unknown[] = [];
    let failing = true;
    const flaky = new Proxy(ctx.db, {
      get(target, property, receiver) {
        if (property === 'updateTable' && failing) throw new Error('database is locked');
        const value = Reflect.get(target, property, receiver);
        // Kysely keeps its state in private fields, which only the real instance can reach.
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const recorder = new LastUseRecorder(flaky, (error) => errors.push(error), 60_000);
    recorder.record(key.id, new Date('2026-05-01T10:00:00Z'));
    await recorder.flush();
    assert.equal(errors.length, 1);
    assert.equal(await lastUsed(key.id), null);

    failing = false;
    await recorder.flush();
    assert.equal(await lastUsed(key.id), '2026-05-01T10:00:00.000Z');

    recorder.record(key.id, new Date('2026-04-01T10:00:00Z'));
    await recorder.close();
    assert.equal(await lastUsed(key.id), '2026-05-01T10:00:00.000Z');
  });
});
