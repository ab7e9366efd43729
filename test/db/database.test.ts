import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import {
  ADMIN_PG_URL,
  bearer,
  createTestContext,
  seedAccount,
  seedKey,
  STORES,
  type TestContext,
} from '../helpers.ts';

describe('PostgreSQL connections lost while idle', { skip: !STORES.includes('postgres') }, () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext('postgres');
  });
  after(() => ctx.close());

  test('are replaced: the server keeps answering after the database kills them', async () => {
    const { rawKey } = await seedKey(ctx.db, await seedAccount(ctx.db));
    const get = () => ctx.app.inject({ url: '/api/v1/public/users', headers: bearer(rawKey) });
    assert.equal((await get()).statusCode, 200);

    const admin = new pg.Client({ connectionString: ADMIN_PG_URL });
    await admin.connect();
    const database = new URL(ctx.databaseUrl).pathname.slice(1);
    const killed = await admin.query(
      'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
      [database],
    );
    await admin.end();
    assert.ok(killed.rowCount !== null && killed.rowCount >= 1);
    // Let the pool hear of it before the next request.
    await new Promise((resolve) => setTimeout(resolve, 200));

    assert.equal((await get()).statusCode, 200);
  });
});
