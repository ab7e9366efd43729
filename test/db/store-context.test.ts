import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import SqliteDatabase from 'better-sqlite3';
import { sql } from 'kysely';
import pg from 'pg';
import {
  type DatabaseHandle,
  openDatabase,
  openServerDatabase,
  STORE_DEADLINE_MS,
  type StoreName,
} from '../../src/db/database.ts';
import { migrateThrough } from '../../src/db/migrate.ts';
import { accountRepository } from '../../src/db/repositories/accounts.ts';
import { auditRepository } from '../../src/db/repositories/audit-events.ts';
import { incidentRepository } from '../../src/db/repositories/incidents.ts';
import { currentOperation, newRequestBudget, repository, runInBudget } from '../../src/db/store-context.ts';
import { isStoreUnavailable } from '../../src/db/store-health.ts';
import { createTestDatabase, seedAccount, STORES } from '../helpers.ts';
import { until } from '../wait.ts';

/** What the store monitor logged, as `level message {details}` lines. */
function monitorLog() {
  const lines: { level: string; message: string; details: Record<string, unknown> }[] = [];
  const logger = {
    warn: (details: object, message: string) =>
      lines.push({ level: 'warn', message, details: { ...details } }),
    info: (details: object, message: string) =>
      lines.push({ level: 'info', message, details: { ...details } }),
  };
  return { lines, logger };
}

/** `work` run as a request's handling, under a budget of `budgetMs` that starts now. */
function asRequest<T>(budgetMs: number, work: () => Promise<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    runInBudget(newRequestBudget(budgetMs), () => {
      work().then(resolve, reject);
    });
  });
}

async function withServerDatabase(
  store: StoreName,
  run: (handle: DatabaseHandle, url: string) => Promise<void>,
  logger = monitorLog().logger,
): Promise<void> {
  const database = await createTestDatabase(store, { migrated: true });
  // Migrated as `serve` and the CLI migrate, through a handle without the server's deadlines (a
  // no-op on the run's migrated template): a busy machine may take longer than they allow.
  await migrateThrough(database.url, database.url);
  const handle = openServerDatabase(database.url, { logger });
  try {
    await run(handle, database.url);
  } finally {
    await handle.destroy();
    await database.drop();
  }
}

describe('repository operations', () => {
  test('every method runs under <repository>.<method>, through awaits, and answers as before', async () => {
    const example = repository('exampleRepository', {
      async twice(value: number) {
        await new Promise((resolve) => setTimeout(resolve, 1));
        return { value: value * 2, operation: currentOperation() };
      },
    });
    assert.deepEqual(await example.twice(21), { value: 42, operation: 'exampleRepository.twice' });
    assert.equal(currentOperation(), undefined, 'nothing outside the call');
  });
});

describe("a request's one budget for the store (PostgreSQL)", { skip: !STORES.includes('postgres') }, () => {
  const sleepOneSecond = (handle: DatabaseHandle) => sql`select pg_sleep(1.0)`.execute(handle.db);

  test('statements share the budget: the second of two 1 s statements fails at the 1.5 s budget, a third is not sent', async () => {
    await withServerDatabase('postgres', async (handle) => {
      const started = Date.now();
      const outcomes = await asRequest(1500, async () => {
        const first = await sleepOneSecond(handle).then(
          () => 'ok',
          (error: unknown) => error,
        );
        const second = await sleepOneSecond(handle).then(
          () => 'ok',
          (error: unknown) => error,
        );
        const secondAt = Date.now() - started;
        const third = await sleepOneSecond(handle).then(
          () => 'ok',
          (error: unknown) => error,
        );
        return { first, second, secondAt, third, thirdMs: Date.now() - started - secondAt };
      });
      assert.equal(outcomes.first, 'ok');
      assert.ok(isStoreUnavailable(outcomes.second), `the second statement: ${String(outcomes.second)}`);
      // Its share was what was left (about 0.5 s, the least a statement is given): it ended well
      // before a statement of its own deadline would have (1 s of sleep, and more).
      assert.ok(outcomes.secondAt < 1500 + 500 + 800, `the second failed ${outcomes.secondAt} ms in`);
      assert.ok(isStoreUnavailable(outcomes.third), `the third statement: ${String(outcomes.third)}`);
      assert.match(String(outcomes.third), /ran out/);
      assert.ok(outcomes.thirdMs < 300, `the third failed after ${outcomes.thirdMs} ms: it was not sent`);
    });
  });

  test("the request's own work between statements does not use up the store's share", async () => {
    await withServerDatabase('postgres', async (handle) => {
      await asRequest(800, async () => {
        await sql`select 1`.execute(handle.db);
        // A password's hash on a busy machine: longer than the whole budget, none of it the store's.
        const until = Date.now() + 1000;
        while (Date.now() < until);
        await sql`select 1`.execute(handle.db);
      });
    });
  });

  test('a budget spent inside a transaction still ends it: the connection goes back to the pool clean', async () => {
    await withServerDatabase('postgres', async (handle) => {
      const outcome = await asRequest(300, () =>
        handle.db
          .transaction()
          .setIsolationLevel('repeatable read')
          .setAccessMode('read only')
          .execute(async (trx) => {
            // Past the budget, within the least a statement is given (0.5 s): it completes.
            await sql`select pg_sleep(0.4)`.execute(trx);
            // The budget is spent: this is refused, and the transaction must be rolled back.
            await sql`select 1`.execute(trx);
          })
          .then(
            () => 'ok',
            (error: unknown) => error,
          ),
      );
      assert.ok(isStoreUnavailable(outcome), String(outcome));
      // Every pooled connection in turn (the pool holds 10): none is still in that transaction.
      const writes = await Promise.allSettled(Array.from({ length: 12 }, () => seedAccount(handle.db)));
      assert.deepEqual(
        writes.filter((write) => write.status === 'rejected').map((write) => String(write.reason)),
        [],
      );
    });
  });

  test('outside a request, and once a request has its answer, each statement has its own deadline', async () => {
    await withServerDatabase('postgres', async (handle) => {
      await sleepOneSecond(handle);
      await sleepOneSecond(handle);
      await new Promise<void>((resolve, reject) => {
        const budget = newRequestBudget(1500);
        runInBudget(budget, () => {
          budget.end();
          sleepOneSecond(handle)
            .then(() => sleepOneSecond(handle))
            .then(() => resolve(), reject);
        });
      });
    });
  });

  test('waiting for a pooled connection draws on the budget too', async () => {
    await withServerDatabase('postgres', async (handle) => {
      // Every pooled connection busy for 1.5 s: a request that arrives then waits for one.
      const busy = Array.from({ length: 10 }, () => sql`select pg_sleep(1.5)`.execute(handle.db));
      await new Promise((resolve) => setTimeout(resolve, 100));
      const started = Date.now();
      const outcome = await asRequest(700, () =>
        sql`select 1`.execute(handle.db).then(
          () => 'ok',
          (error: unknown) => error,
        ),
      );
      const elapsed = Date.now() - started;
      assert.ok(isStoreUnavailable(outcome), String(outcome));
      assert.ok(elapsed < 700 + 600, `no connection within the budget, said after ${elapsed} ms`);
      await Promise.all(busy);
    });
  });
});

describe("a request's one budget for the store (SQLite)", { skip: !STORES.includes('sqlite') }, () => {
  test("a write meeting another process's lock gives up at the request's budget, not the per-call deadline", async () => {
    await withServerDatabase('sqlite', async (handle, url) => {
      const other = new SqliteDatabase(url.slice('sqlite:'.length));
      try {
        other.exec('BEGIN IMMEDIATE');
        const started = Date.now();
        const outcome = await asRequest(800, () =>
          seedAccount(handle.db).then(
            () => 'ok',
            (error: unknown) => error,
          ),
        );
        const elapsed = Date.now() - started;
        assert.ok(isStoreUnavailable(outcome), String(outcome));
        assert.ok(
          elapsed >= 700 && elapsed < STORE_DEADLINE_MS - 300,
          `gave up after ${elapsed} ms (budget 800 ms, per call ${STORE_DEADLINE_MS} ms)`,
        );
      } finally {
        other.close();
      }
    });
  });
});

describe('statements that time out are named in the log', () => {
  for (const store of STORES) {
    test(`${store}: the outage line names the repository operation, the recovery line counts each, no parameter appears`, async () => {
      const { lines, logger } = monitorLog();
      await withServerDatabase(
        store,
        async (handle, url) => {
          const accountId = await seedAccount(handle.db);
          const secretId = '7a2c1e9d-0000-4000-8000-5ec2e7000000';
          let release: () => Promise<void>;
          if (store === 'postgres') {
            // Another session holds the table: the read waits until statement_timeout cancels it.
            const locker = new pg.Client({ connectionString: url });
            await locker.connect();
            await locker.query('begin; lock table incidents in access exclusive mode');
            release = async () => {
              await locker.query('rollback');
              await locker.end();
            };
            await assert.rejects(
              incidentRepository.findById(handle.db, accountId, secretId),
              isStoreUnavailable,
            );
          } else {
            // Another process holds the write lock: the write keeps meeting it until its deadline.
            const other = new SqliteDatabase(url.slice('sqlite:'.length));
            other.exec('BEGIN IMMEDIATE');
            release = async () => {
              other.close();
            };
            await assert.rejects(
              auditRepository.insert(handle.db, {
                account_id: accountId,
                subject_type: 'api_key',
                subject_id: secretId,
                actor: 'test',
                action: 'created',
                detail: null,
                created_at: new Date().toISOString(),
              }),
              isStoreUnavailable,
            );
          }
          const operation = store === 'postgres' ? 'incidentRepository.findById' : 'auditRepository.insert';
          const warn = lines.find((line) => line.level === 'warn');
          assert.equal(warn?.details.operation, operation, JSON.stringify(lines));
          await release();
          await until(() => lines.some((line) => line.level === 'info'), 15_000, 'the recovery line', 20);
          const info = lines.find((line) => line.level === 'info');
          assert.deepEqual(info?.details.failed, { [operation]: 1 });
          assert.doesNotMatch(JSON.stringify(lines), new RegExp(`${secretId}|${accountId}`));
        },
        logger,
      );
    });
  }
});

describe("a feed writer's lock on its account (PostgreSQL)", { skip: !STORES.includes('postgres') }, () => {
  test('holds off another writer of the feed, but not a row that references the account', async () => {
    await withServerDatabase('postgres', async (server, url) => {
      const accountId = await seedAccount(server.db);
      // Two writers as the command line opens them (no deadlines): an import, then a second one.
      const importer = openDatabase(url);
      const second = openDatabase(url);
      const watcher = new pg.Client({ connectionString: url });
      await watcher.connect();
      let commitImport: () => void = () => {};
      const committed = new Promise<void>((resolve) => {
        commitImport = resolve;
      });
      try {
        let locked: () => void = () => {};
        const holding = new Promise<void>((resolve) => {
          locked = resolve;
        });
        const importing = importer.db.transaction().execute(async (trx) => {
          await accountRepository.lockForChanges(trx, accountId);
          locked();
          await committed;
        });
        await holding;
        // A second writer of the account's feed waits for the first.
        let secondDone = false;
        const secondWriter = second.db.transaction().execute(async (trx) => {
          await accountRepository.lockForChanges(trx, accountId);
          secondDone = true;
        });
        await until(
          async () => {
            const { rows } = await watcher.query<{ n: number }>(
              "select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()",
            );
            return (rows[0]?.n ?? 0) > 0;
          },
          15_000,
          'the second writer to wait for the lock',
          20,
        );
        assert.equal(secondDone, false);
        // Meanwhile the server writes a row that references the account (its foreign key takes a
        // KEY SHARE lock on the account), within its ~2 s statement deadline.
        await auditRepository.insert(server.db, {
          account_id: accountId,
          subject_type: 'api_key',
          subject_id: accountId,
          actor: 'cli',
          action: 'disabled',
          detail: null,
          created_at: new Date().toISOString(),
        });
        assert.equal(secondDone, false, 'the second writer still waits');
        commitImport();
        await importing;
        await secondWriter;
        assert.equal(secondDone, true);
      } finally {
        commitImport();
        await watcher.end();
        await importer.destroy();
        await second.destroy();
      }
    });
  });
});
