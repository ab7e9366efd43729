import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { CompiledQuery } from 'kysely';
import pg from 'pg';
import { postgresSnapshots } from '../../src/db/postgres/snapshots.ts';
import type { SnapshotSource } from '../../src/db/snapshot.ts';
import { createTestDatabase, STORES, type TestDatabase } from '../helpers.ts';

/**
 * A PostgreSQL snapshot's COPY (what an export of incidents streams from): it outlives the pool's
 * statement_timeout, a copy its reader stops asking for is ended after the stall limit, and a copy
 * not read to its end closes its connection rather than handing it on mid-copy.
 */

const STATEMENT_TIMEOUT_MS = 200;
const SILENT_AFTER_MS = 500;
const STALLED_AFTER_MS = 1500;
const ROWS = 300_000;
const series = CompiledQuery.raw(`select g, 'row ' || g from generate_series(1, ${ROWS}) g`);

if (STORES.includes('postgres')) {
  describe('PostgreSQL snapshots: COPY (postgres)', () => {
    let database: TestDatabase;
    let pool: pg.Pool;
    let snapshots: SnapshotSource;
    let admin: pg.Client;

    before(async () => {
      database = await createTestDatabase('postgres');
      pool = new pg.Pool({ connectionString: database.url, max: 1, statement_timeout: STATEMENT_TIMEOUT_MS });
      snapshots = postgresSnapshots(pool, {
        silentAfterMs: SILENT_AFTER_MS,
        stalledAfterMs: STALLED_AFTER_MS,
      });
      admin = new pg.Client({ connectionString: database.url });
      await admin.connect();
    });
    after(async () => {
      await admin.end();
      await snapshots.close();
      await database.drop();
    });

    const copying = async () =>
      (
        await admin.query<{ n: number }>(
          `select count(*)::int as n from pg_stat_activity where datname = current_database() and query like 'COPY (%'`,
        )
      ).rows[0]?.n;

    test('a copy read slowly, past the statement timeout, runs to its end; the connection is reused', async () => {
      const snapshot = await snapshots.open();
      let text = '';
      const copy = snapshot.copyOut?.(series);
      assert.ok(copy !== undefined, 'PostgreSQL snapshots copy');
      let reads = 0;
      const started = Date.now();
      for await (const chunk of copy) {
        text += chunk.toString();
        reads += 1;
        if (reads % 5 === 0) await sleep(50);
      }
      assert.ok(
        Date.now() - started > STATEMENT_TIMEOUT_MS * 2,
        'the copy took longer than the statement timeout',
      );
      const lines = text.split('\n');
      assert.equal(lines.length, ROWS + 1);
      assert.equal(lines[0], '1\trow 1');
      assert.equal(lines[ROWS - 1], `${ROWS}\trow ${ROWS}`);
      await snapshot.release();
      assert.equal(pool.totalCount, 1, 'the connection went back to the pool');
      assert.equal(pool.idleCount, 1);
    });

    test('a copy whose reader stops asking is ended after the stall limit, and its connection closed', async () => {
      const snapshot = await snapshots.open();
      const copy = snapshot.copyOut?.(series);
      assert.ok(copy !== undefined);
      const first = await copy.next();
      assert.equal(first.done, false);
      assert.equal(await copying(), 1);
      await sleep(STALLED_AFTER_MS + 500);
      await assert.rejects(async () => {
        for (;;) if ((await copy.next()).done === true) break;
      }, /not read for 1500 ms/);
      await snapshot.release();
      const deadline = Date.now() + 5000;
      while ((await copying()) !== 0) {
        assert.ok(Date.now() < deadline, 'the COPY backend is gone');
        await sleep(50);
      }
      assert.equal(pool.totalCount, 0, 'the connection was closed, not pooled');
    });

    test('a copy PostgreSQL sends nothing of for longer than its limit (a stuck server) is ended, and its connection closed', async () => {
      const snapshot = await snapshots.open();
      // The first row comes after 1.5 s: for this pool, PostgreSQL has gone silent after 0.5 s.
      const copy = snapshot.copyOut?.(CompiledQuery.raw("select 'late' from pg_sleep(1.5)"));
      assert.ok(copy !== undefined);
      const started = Date.now();
      await assert.rejects(copy.next(), {
        name: 'StoreUnavailableError',
        message: /sent no rows for 500 ms/,
      });
      assert.ok(Date.now() - started < 1400, 'ended at the limit, not when the rows came');
      await snapshot.release();
      assert.equal(pool.totalCount, 0, 'the connection was closed, not pooled');
    });

    test('a copy abandoned by its reader closes its connection; the next snapshot gets a fresh one', async () => {
      const snapshot = await snapshots.open();
      const copy = snapshot.copyOut?.(series);
      assert.ok(copy !== undefined);
      await copy.next();
      await copy.return(undefined);
      await snapshot.release();
      assert.equal(pool.totalCount, 0);
      const next = await snapshots.open();
      const again = next.copyOut?.(CompiledQuery.raw('select 1'));
      assert.ok(again !== undefined);
      const chunks: Buffer[] = [];
      for await (const chunk of again) chunks.push(chunk);
      assert.equal(Buffer.concat(chunks).toString(), '1\n');
      await next.release();
      assert.equal(pool.idleCount, 1);
    });
  });
}
