import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, mock, test } from 'node:test';
import SqliteDatabase from 'better-sqlite3';
import { type Kysely, sql } from 'kysely';
import { type DatabaseHandle, openServerDatabase } from '../../src/db/database.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import type { Database } from '../../src/db/schema.ts';
import { until } from '../wait.ts';
import {
  isStoreUnavailable,
  type MonitorLogger,
  StoreMonitor,
  StoreUnavailableError,
} from '../../src/db/store-health.ts';

const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });

describe('isStoreUnavailable', () => {
  test('outages are unavailable, query and input errors are not', () => {
    for (const error of [
      new StoreUnavailableError('deadline'),
      withCode('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED'),
      withCode('terminating connection due to administrator command', '57P01'),
      withCode('the database system is starting up', '57P03'),
      withCode('sorry, too many clients already', '53300'),
      withCode('canceling statement due to statement timeout', '57014'),
      withCode('connection failure', '08006'),
      withCode('database "x" is not currently accepting connections', '55000'),
      withCode('database is locked', 'SQLITE_BUSY'),
      new Error('Connection terminated unexpectedly'),
      new Error('timeout exceeded when trying to connect'),
      new Error('wrapped', { cause: withCode('refused', 'ECONNREFUSED') }),
    ]) {
      assert.equal(isStoreUnavailable(error), true, error.message);
    }
    for (const error of [
      withCode('duplicate key value violates unique constraint', '23505'),
      withCode('relation "x" does not exist', '42P01'),
      withCode('object is in use', '55000'),
      withCode('UNIQUE constraint failed', 'SQLITE_CONSTRAINT_UNIQUE'),
      new Error('anything else'),
      'not an error',
      null,
    ]) {
      assert.equal(isStoreUnavailable(error), false, String(error));
    }
  });
});

describe('StoreMonitor', () => {
  // The monitor's rules are about time (a probe every interval, a quiet period after the last
  // failure): they run on node:test's mocked setTimeout and Date, so a busy machine cannot stretch
  // a wait past a threshold. `advance` moves the clock and lets the probe's promise settle.
  beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 }));
  afterEach(() => mock.timers.reset());
  const advance = async (ms: number) => {
    mock.timers.tick(ms);
    for (let i = 0; i < 5; i += 1) await Promise.resolve();
  };

  test('one warn line when down however many failures, one info line when a probe succeeds', async () => {
    const lines: string[] = [];
    let healthy = false;
    const monitor = new StoreMonitor(
      async () => {
        if (!healthy) throw new Error('still down');
      },
      { warn: (_d, m) => lines.push(`warn ${m}`), info: (_d, m) => lines.push(`info ${m}`) },
      20,
      50,
    );
    try {
      monitor.report(new Error('a bad query'));
      assert.equal(monitor.available, true, 'an ordinary error is not an outage');
      for (let i = 0; i < 100; i += 1) monitor.report(new StoreUnavailableError('down'));
      assert.equal(monitor.available, false);
      for (let elapsed = 0; elapsed < 200; elapsed += 20) await advance(20);
      assert.equal(monitor.available, false, 'the probes fail: still down');
      healthy = true;
      await advance(20);
      assert.equal(monitor.available, true, 'the first probe that succeeds past the quiet period');
      assert.equal(lines.length, 2, lines.join('\n'));
      assert.match(lines[0] ?? '', /^warn store unavailable/);
      assert.match(lines[1] ?? '', /^info store available again/);
    } finally {
      monitor.close();
    }
  });

  test('while requests keep failing, a succeeding probe does not end the outage: no alternating lines', async () => {
    // A long lock on one table: `select 1` answers, the requests that read the table time out.
    const lines: string[] = [];
    const monitor = new StoreMonitor(
      async () => {},
      { warn: (_d, m) => lines.push(`warn ${m}`), info: (_d, m) => lines.push(`info ${m}`) },
      20,
      100,
    );
    try {
      // 600 ms of failures every 40 ms: the probe succeeds about 30 times meanwhile.
      for (let i = 0; i < 15; i += 1) {
        monitor.report(new StoreUnavailableError('canceling statement due to statement timeout'));
        await advance(40);
        assert.equal(monitor.available, false, `still down while requests fail (${i})`);
      }
      // The last failure was at 560 ms; it is 600 ms now, and the quiet period is 100 ms.
      await advance(40);
      assert.equal(monitor.available, false, 'not before the quiet period has passed');
      await advance(40);
      assert.equal(monitor.available, true, 'back once the failures stopped for the quiet period');
      assert.equal(lines.length, 2, lines.join('\n'));
      assert.match(lines[0] ?? '', /^warn store unavailable/);
      assert.match(lines[1] ?? '', /^info store available again/);
    } finally {
      monitor.close();
    }
  });
});

/**
 * A migrated server database in a fresh folder, and a second connection (another process's, as a
 * CLI import would have) holding its write lock; all of it closed and removed afterwards.
 */
async function withWriteLockHeld(
  run: (handle: DatabaseHandle, other: SqliteDatabase.Database) => Promise<void>,
  logger: MonitorLogger = { warn: () => {}, info: () => {} },
  sqliteDeadlineMs?: number,
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'safety-api-driver-'));
  const path = join(dir, 'test.db');
  const handle = openServerDatabase(`sqlite:${path}`, {
    logger,
    ...(sqliteDeadlineMs === undefined ? {} : { sqliteDeadlineMs }),
  });
  let other: SqliteDatabase.Database | null = null;
  try {
    await migrateToLatest(handle.db);
    other = new SqliteDatabase(path);
    other.exec('BEGIN IMMEDIATE');
    await run(handle, other);
  } finally {
    other?.close();
    await handle.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}

const insertAccount = (db: Kysely<Database>) =>
  sql`insert into accounts (id, name, api_access, rate_limit_per_hour, created_at, updated_at)
    values ('a1', 'A', 1, 10, '2026-01-01', '2026-01-01')`.execute(db);

const countAccounts = async (db: Kysely<Database>) =>
  (await sql<{ n: number }>`select count(*) as n from accounts`.execute(db)).rows[0]?.n;

describe("the server's SQLite driver", () => {
  // The lock is released when the test has seen what it waits for, not at a set time: the write's
  // deadline is set far above those events, so a busy machine cannot turn a wait into a failure.
  test('a transaction waits for another writer asynchronously and succeeds once it is gone; reads go on meanwhile', async () => {
    const lines: string[] = [];
    const logger: MonitorLogger = { warn: (_d, m) => lines.push(m), info: (_d, m) => lines.push(m) };
    await withWriteLockHeld(
      async (handle, other) => {
        let ticks = 0;
        const ticker = setInterval(() => {
          ticks += 1;
        }, 10);
        let committed = false;
        const write = handle.db
          .transaction()
          .execute((trx) => insertAccount(trx))
          .then(() => {
            committed = true;
          });
        try {
          // A read while the transaction is still waiting for BEGIN IMMEDIATE: were it queued behind
          // the writer, it could not answer before the lock is released below.
          assert.equal(await countAccounts(handle.db), 0);
          assert.equal(committed, false, 'the read did not wait for the writer');
          // The event loop runs all along: a blocking busy wait would stop the ticker.
          await until(() => ticks >= 20, 30_000, '20 ticks of the event loop while the write waits');
          assert.equal(committed, false, 'the write waits while the other process holds the lock');
        } finally {
          clearInterval(ticker);
        }
        other.exec('COMMIT');
        await write;
        assert.equal(await countAccounts(handle.db), 1);
        assert.deepEqual(lines, [], 'a wait within the deadline is no outage');
      },
      logger,
      60_000,
    );
  });

  test('a read-only transaction does not wait behind a write transaction that waits for another writer', async () => {
    await withWriteLockHeld(
      async (handle, other) => {
        let writeSettled = false;
        // Meets the other process's lock at BEGIN IMMEDIATE and keeps trying (as the store monitor's
        // write probe does after an outage, or an admin panel write during a CLI import).
        const write = handle.db
          .transaction()
          .execute((trx) => insertAccount(trx))
          .finally(() => {
            writeSettled = true;
          });
        // One turn of the event loop: the write has met the lock and sleeps before its next try.
        await new Promise((resolve) => setImmediate(resolve));
        // A snapshot read (a feed page, an export) begun while the write waits; the lock is only
        // released after it, so a read queued behind the write would answer only once the write
        // had given up at its deadline.
        const read = await handle.db
          .transaction()
          .setAccessMode('read only')
          .execute((trx) => countAccounts(trx));
        assert.equal(read, 0);
        assert.equal(writeSettled, false, 'the snapshot read answered while the write still waited');
        other.exec('COMMIT');
        await write;
        assert.equal(await countAccounts(handle.db), 1, 'and the write went through once the lock was gone');
      },
      undefined,
      20_000,
    );
  });

  test('past the ~2 s deadline a write fails as "store unavailable"', async () => {
    await withWriteLockHeld(async (handle) => {
      const started = Date.now();
      await assert.rejects(insertAccount(handle.db), (error) => isStoreUnavailable(error));
      const elapsed = Date.now() - started;
      assert.ok(elapsed >= 1500 && elapsed < 3000, `failed after ${elapsed} ms`);
    });
  });
});
