import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { hashApiKey } from '../../src/auth/api-keys.ts';
import { KEY_ROW_MAX_AGE_MS, KeyLookup } from '../../src/auth/key-lookup.ts';
import { type DatabaseHandle, openDatabase } from '../../src/db/database.ts';
import { apiKeyRepository } from '../../src/db/repositories/api-keys.ts';
import { apiKeyService } from '../../src/services/api-key-service.ts';
import { bearer, createTestContext, STORES, seedAccount, seedKey, type TestContext } from '../helpers.ts';

describe('key lookup', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext('sqlite');
  });
  after(() => ctx.close());

  test('serves a row again only while the commit watch reports no commit', async () => {
    const accountId = await seedAccount(ctx.db);
    const key = await seedKey(ctx.db, accountId);
    let generation = 1;
    const lookup = new KeyLookup(ctx.db, { current: async () => generation });
    const keyHash = hashApiKey(key.rawKey);

    assert.equal((await lookup.findByHash(keyHash))?.state, 'active');
    await apiKeyService.disable(ctx.db, key.id, 'test');
    // The watch (here a fake that never moves) is what lets a row be served again...
    assert.equal((await lookup.findByHash(keyHash))?.state, 'active');
    // ...and a new generation makes the lookup read the store.
    generation = 2;
    assert.equal((await lookup.findByHash(keyHash))?.state, 'disabled');
  });

  test('concurrent lookups under one generation share one read; a new generation reads again', async () => {
    const accountId = await seedAccount(ctx.db);
    const key = await seedKey(ctx.db, accountId);
    let reads = 0;
    const counted = ctx.db.withPlugin({
      transformQuery: (args) => args.node,
      transformResult: async (args) => {
        reads += 1;
        return args.result;
      },
    });
    let generation = 1;
    const lookup = new KeyLookup(counted, { current: async () => generation });
    const keyHash = hashApiKey(key.rawKey);

    const first = await Promise.all(Array.from({ length: 20 }, () => lookup.findByHash(keyHash)));
    assert.deepEqual(new Set(first.map((row) => row?.state)), new Set(['active']));
    assert.equal(reads, 1);

    await apiKeyService.disable(ctx.db, key.id, 'test');
    generation = 2;
    const second = await Promise.all(Array.from({ length: 20 }, () => lookup.findByHash(keyHash)));
    assert.deepEqual(new Set(second.map((row) => row?.state)), new Set(['disabled']));
    assert.equal(reads, 2);
  });

  test('an unknown key is looked up afresh every time, never remembered', async () => {
    const accountId = await seedAccount(ctx.db);
    const lookup = new KeyLookup(ctx.db, { current: async () => 1 });
    const rawKey = `svc_${randomBytes(20).toString('hex')}`;
    assert.equal(await lookup.findByHash(hashApiKey(rawKey)), undefined);

    const now = new Date().toISOString();
    await apiKeyRepository.insert(ctx.db, {
      id: randomUUID(),
      account_id: accountId,
      name: 'stored after the miss',
      prefix: rawKey.slice(0, 12),
      key_hash: hashApiKey(rawKey),
      scope: 'read',
      state: 'active',
      expires_at: null,
      last_used_at: null,
      created_by: null,
      created_at: now,
      updated_at: now,
    });
    // Same generation: only a remembered miss could hide the key now.
    assert.equal((await lookup.findByHash(hashApiKey(rawKey)))?.account_id, accountId);
  });

  test('without a commit watch (PostgreSQL), every lookup reads the store', async () => {
    const accountId = await seedAccount(ctx.db);
    const key = await seedKey(ctx.db, accountId);
    const lookup = new KeyLookup(ctx.db, null);
    const keyHash = hashApiKey(key.rawKey);
    assert.equal((await lookup.findByHash(keyHash))?.scope, 'read');
    await apiKeyService.setScope(ctx.db, key.id, 'admin', 'test');
    assert.equal((await lookup.findByHash(keyHash))?.scope, 'admin');
  });
});

for (const store of STORES) {
  describe(`key lookup: the rows' maximum age (${store})`, () => {
    let ctx: TestContext;
    before(async () => {
      ctx = await createTestContext(store);
    });
    after(() => ctx.close());

    /** A watch that never moves: a write whose writer could not bump it, as far as it can tell. */
    const unchanged = { current: async () => 'unchanged' };
    const readAt = Date.parse('2026-05-01T12:00:00.000Z');

    test('a row is served under an unchanged generation until it is KEY_ROW_MAX_AGE_MS old, then read again', async () => {
      const accountId = await seedAccount(ctx.db);
      const key = await seedKey(ctx.db, accountId);
      const lookup = new KeyLookup(ctx.db, unchanged);
      const keyHash = hashApiKey(key.rawKey);

      assert.equal((await lookup.findByHash(keyHash, readAt))?.state, 'active');
      // Revoked around every writer that bumps: nothing tells the lookup.
      await apiKeyService.revoke(ctx.db, key.id, 'test');
      const last = readAt + KEY_ROW_MAX_AGE_MS - 1;
      assert.equal((await lookup.findByHash(keyHash, last))?.state, 'active', 'still young: served');
      assert.equal(lookup.remembered(keyHash, last)?.row.state, 'active');

      const aged = readAt + KEY_ROW_MAX_AGE_MS;
      assert.equal(lookup.remembered(keyHash, aged), undefined, 'too old for the fast path');
      assert.equal((await lookup.findByHash(keyHash, aged))?.state, 'revoked', 'read again');
      // The row read then is young again, from that time.
      assert.equal(lookup.remembered(keyHash, aged + KEY_ROW_MAX_AGE_MS - 1)?.row.state, 'revoked');
    });

    test('a clock that went back makes a row too old to serve', async () => {
      const accountId = await seedAccount(ctx.db);
      const key = await seedKey(ctx.db, accountId);
      const lookup = new KeyLookup(ctx.db, unchanged);
      const keyHash = hashApiKey(key.rawKey);

      assert.equal((await lookup.findByHash(keyHash, readAt))?.scope, 'read');
      await apiKeyService.setScope(ctx.db, key.id, 'admin', 'test');
      assert.equal(lookup.remembered(keyHash, readAt - 1), undefined);
      assert.equal((await lookup.findByHash(keyHash, readAt - 1))?.scope, 'admin');
    });
  });
}

describe('key and plan changes written by another instance (SQLite)', () => {
  let ctx: TestContext;
  let other: DatabaseHandle;
  before(async () => {
    ctx = await createTestContext('sqlite');
    // Another server instance or a CLI command: its own connection to the same file.
    other = openDatabase(ctx.databaseUrl);
  });
  after(async () => {
    await other.destroy();
    await ctx.close();
  });

  const get = (rawKey: string, method: 'GET' | 'POST' = 'GET') =>
    ctx.app.inject({ method, url: '/api/v1/public/incidents', headers: bearer(rawKey) });

  test('apply at the very next request, however often the key was just used', async () => {
    const accountId = await seedAccount(ctx.db);
    const key = await seedKey(ctx.db, accountId);
    const warm = async () => {
      for (let i = 0; i < 3; i += 1) assert.equal((await get(key.rawKey)).statusCode, 200);
    };

    await warm();
    await apiKeyService.disable(other.db, key.id, 'other instance');
    assert.equal((await get(key.rawKey)).json().error, 'API_KEY_INVALID');
    await apiKeyService.enable(other.db, key.id, 'other instance');
    await warm();

    assert.equal((await get(key.rawKey, 'POST')).json().error, 'INSUFFICIENT_SCOPE');
    await apiKeyService.setScope(other.db, key.id, 'read-write', 'other instance');
    assert.equal((await get(key.rawKey, 'POST')).statusCode, 405);

    await other.db
      .updateTable('accounts')
      .set({ rate_limit_per_hour: 700 })
      .where('id', '=', accountId)
      .execute();
    assert.equal((await get(key.rawKey)).headers['x-ratelimit-limit'], '700');

    await other.db.updateTable('accounts').set({ api_access: 0 }).where('id', '=', accountId).execute();
    assert.equal((await get(key.rawKey)).json().error, 'FEATURE_NOT_AVAILABLE');
    await other.db.updateTable('accounts').set({ api_access: 1 }).where('id', '=', accountId).execute();
    assert.equal((await get(key.rawKey)).statusCode, 200);

    await apiKeyService.revoke(other.db, key.id, 'other instance');
    assert.equal((await get(key.rawKey)).json().error, 'API_KEY_INVALID');
  });
});
