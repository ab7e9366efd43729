import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import SqliteDatabase from 'better-sqlite3';
import { sql } from 'kysely';
import { hashApiKey } from '../../src/auth/api-keys.ts';
import { KeyLookup } from '../../src/auth/key-lookup.ts';
import { cacheBudgets } from '../../src/config.ts';
import { openServerDatabase } from '../../src/db/database.ts';
import { withStatementCache } from '../../src/db/sqlite/statement-cache.ts';
import { recordBytes } from '../../src/lib/lru.ts';
import { createTestContext, seedAccount, seedKey } from '../helpers.ts';

const silent = { warn: () => {}, info: () => {} };

describe('caches bounded in bytes (CACHE_MAX_MB)', () => {
  test('SQLite: the page cache is the share given, the default share otherwise', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cache-budgets-'));
    try {
      const pageCacheKib = async (caches?: { sqlitePages: number; sqliteStatements: number }) => {
        const handle = openServerDatabase(`sqlite:${join(dir, 'pages.db')}`, {
          logger: silent,
          ...(caches === undefined ? {} : { caches }),
        });
        try {
          const { rows } = await sql<{ cache_size: number }>`PRAGMA cache_size`.execute(handle.db);
          return -Number(rows[0]?.cache_size);
        } finally {
          await handle.destroy();
        }
      };
      assert.equal(await pageCacheKib({ sqlitePages: 8 * 1024 * 1024, sqliteStatements: 65_536 }), 8192);
      assert.equal(await pageCacheKib(), cacheBudgets(64).sqlitePages / 1024);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('prepared statements: the least recently used go once their estimated bytes pass the budget', () => {
    const sqlite = new SqliteDatabase(':memory:');
    const prepared: string[] = [];
    const prepare = sqlite.prepare.bind(sqlite);
    sqlite.prepare = ((source: string) => {
      prepared.push(source);
      return prepare(source);
    }) as typeof sqlite.prepare;
    // Room for two short statements (2 KiB each and 4 bytes per character), not three.
    const cache = withStatementCache(sqlite, 5000);
    const short = (n: number) => `SELECT ${n}`;
    cache.prepare(short(1));
    cache.prepare(short(2));
    cache.prepare(short(1));
    assert.deepEqual(prepared, [short(1), short(2)], 'kept while within the budget');
    cache.prepare(short(3));
    cache.prepare(short(1));
    cache.prepare(short(2));
    assert.deepEqual(prepared, [short(1), short(2), short(3), short(2)], 'the least recently used went');
    // One statement larger than the whole budget is prepared every time and evicts nothing.
    const long = `SELECT '${'x'.repeat(1000)}'`;
    cache.prepare(long);
    cache.prepare(long);
    cache.prepare(short(1));
    assert.deepEqual(prepared.slice(4), [long, long], 'the long one is never kept; 1 still is');
    sqlite.close();
  });

  test('key rows: kept within their bytes, the least recently read dropped first', async () => {
    const ctx = await createTestContext('sqlite');
    try {
      const accountId = await seedAccount(ctx.db);
      const [a, b] = await Promise.all([seedKey(ctx.db, accountId), seedKey(ctx.db, accountId)]);
      const [hashA, hashB] = [hashApiKey(a.rawKey), hashApiKey(b.rawKey)];
      const probe = new KeyLookup(ctx.db, { current: async () => 1 });
      const row = await probe.findByHash(hashA);
      assert.ok(row !== undefined);
      // Room for one row with its key hash and bookkeeping, not two.
      const oneRow = recordBytes(row) + hashA.length * 2 + 64;
      const lookup = new KeyLookup(ctx.db, { current: async () => 1 }, Math.floor(oneRow * 1.5));
      await lookup.findByHash(hashA);
      assert.ok(lookup.remembered(hashA) !== undefined, 'within the budget: kept');
      await lookup.findByHash(hashB);
      assert.equal(lookup.remembered(hashA), undefined, 'past it: the older row went');
      assert.ok(lookup.remembered(hashB) !== undefined);
    } finally {
      await ctx.close();
    }
  });
});
