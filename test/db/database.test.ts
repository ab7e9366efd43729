import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type CompiledQuery, sql } from 'kysely';
import SqliteDatabase from 'better-sqlite3';
import pg from 'pg';
import { openDatabase } from '../../src/db/database.ts';
import type { PostgresStore } from '../../src/db/postgres/store.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import {
  ADMIN_PG_URL,
  bearer,
  createTestContext,
  createTestDatabase,
  seedAccount,
  seedKey,
  STORES,
  type TestContext,
} from '../helpers.ts';
import { until } from '../wait.ts';

describe('PostgreSQL connections lost while idle', { skip: !STORES.includes('postgres') }, () => {
  let ctx: TestContext;
  const warnings: object[] = [];
  before(async () => {
    ctx = await createTestContext(
      'postgres',
      {},
      { runtimeLogger: { warn: (details: object) => warnings.push(details), error: () => {} } },
    );
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
    // The pool hears of it before the next request: until the connection's error (which the
    // store's monitor reports, in the same turn as the pool drops the connection), the connection
    // it would hand out is one it does not know is dead.
    await until(
      () =>
        warnings.some(
          (details) => 'reason' in details && /administrator command/.test(String(details.reason)),
        ),
      5000,
      () => `the pool to hear that its idle connection was killed: ${JSON.stringify(warnings)}`,
    );

    assert.equal((await get()).statusCode, 200);
  });
});

describe('A PostgreSQL handle', { skip: !STORES.includes('postgres') }, () => {
  test('read only through snapshots, closes their connection when destroyed', async () => {
    // copy-store and accounts export read a PostgreSQL source through snapshots alone: the process
    // must end when they are done, not when the snapshot pool's idle timer (10 s) ends it.
    const database = await createTestDatabase('postgres');
    // Counted by the server, for this test's database alone: the test process's own sockets
    // include those of other tests, closing a moment after their pools end.
    const admin = new pg.Client({ connectionString: ADMIN_PG_URL });
    await admin.connect();
    const connections = async () =>
      (
        await admin.query<{ count: number }>(
          'SELECT count(*)::int AS count FROM pg_stat_activity WHERE datname = $1',
          [new URL(database.url).pathname.slice(1)],
        )
      ).rows[0]?.count;
    try {
      const handle = openDatabase(database.url);
      const snapshot = await handle.snapshots.open();
      assert.deepEqual((await sql<{ one: number }>`select 1 as one`.execute(snapshot.db)).rows, [{ one: 1 }]);
      await snapshot.release();
      assert.equal(await connections(), 1, 'the snapshot connection stays in its pool between snapshots');
      await handle.destroy();
      // pg-pool's end() resolves once it has told each connection to end; the connection closes a
      // moment later. Waited for up to 5 s: far above the milliseconds it takes, well below the
      // 10 s after which the pool's idle timer would close a connection left open.
      await until(async () => (await connections()) === 0, 5000, 'the snapshot connection to close', 10);
    } finally {
      await admin.end();
      await database.drop();
    }
  });
});

describe('PostgreSQL statements marked for reuse', { skip: !STORES.includes('postgres') }, () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext('postgres');
  });
  after(() => ctx.close());
  const preparedOnPostgres = <R>(query: CompiledQuery<R>) => ctx.runtime.database.store.prepared(query);

  test('are prepared once per connection and then run by name; others are not', async () => {
    await ctx.db.connection().execute(async (connection) => {
      const marked = preparedOnPostgres(
        sql<{ sum: number }>`SELECT ${20}::int + 1 AS sum`.compile(connection),
      );
      const unmarked = sql<{ sum: number }>`SELECT ${30}::int + 2 AS sum`.compile(connection);
      for (let i = 0; i < 2; i += 1) {
        assert.deepEqual((await connection.executeQuery(marked)).rows, [{ sum: 21 }]);
        assert.deepEqual((await connection.executeQuery({ ...marked, parameters: [40] })).rows, [
          { sum: 41 },
        ]);
        assert.deepEqual((await connection.executeQuery(unmarked)).rows, [{ sum: 32 }]);
      }
      const prepared = await sql<{ statement: string }>`SELECT statement FROM pg_prepared_statements`.execute(
        connection,
      );
      assert.deepEqual(
        prepared.rows.map((row) => row.statement),
        [marked.sql],
      );
    });
  });

  test('the key check is one of them', async () => {
    const { rawKey } = await seedKey(ctx.db, await seedAccount(ctx.db));
    // The pool's connections are opened one at a time, as needed: sequential requests share one.
    for (let i = 0; i < 3; i += 1) {
      const res = await ctx.app.inject({ url: '/api/v1/public/users', headers: bearer(rawKey) });
      assert.equal(res.statusCode, 200);
    }
    const prepared = await sql<{ statement: string }>`SELECT statement FROM pg_prepared_statements`.execute(
      ctx.db,
    );
    assert.equal(prepared.rows.filter((row) => row.statement.includes('"key_hash"')).length, 1);
  });

  test("the changes feed's reads are among them: the head and every table but the incidents' COPY", async () => {
    const { rawKey } = await seedKey(ctx.db, await seedAccount(ctx.db));
    for (let i = 0; i < 2; i += 1) {
      const res = await ctx.app.inject({ url: '/api/v1/public/changes', headers: bearer(rawKey) });
      assert.equal(res.statusCode, 200);
    }
    const prepared = await sql<{ statement: string }>`SELECT statement FROM pg_prepared_statements`.execute(
      ctx.db,
    );
    const statements = prepared.rows.map((row) => row.statement);
    for (const table of ['accounts', 'incident_tombstones', 'users', 'departments', 'locations']) {
      assert.equal(statements.filter((text) => text.includes(`from "${table}"`)).length, 1, table);
    }
    assert.ok(!statements.some((text) => text.includes('from "incidents"')), 'the COPY is not prepared');
  });
});

describe('PostgreSQL statements marked to be copied', { skip: !STORES.includes('postgres') }, () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestContext('postgres');
  });
  after(() => ctx.close());
  const copiedOnPostgres = (query: CompiledQuery) =>
    (ctx.runtime.database.store as PostgresStore).copiedQuery(query);

  test("run as COPY in the caller's transaction and answer its text, literals escaped", async () => {
    const text = await ctx.db.transaction().execute(async (trx) => {
      await sql`CREATE TEMP TABLE copied_rows (n int, t text) ON COMMIT DROP`.execute(trx);
      await sql`INSERT INTO copied_rows VALUES (1, ${"it's"}), (2, NULL), (3, ${'tab\there'})`.execute(trx);
      const query =
        sql`SELECT n, t FROM copied_rows WHERE t IS DISTINCT FROM ${"o'clock"} ORDER BY n`.compile(trx);
      const { rows } = await trx.executeQuery(copiedOnPostgres(query));
      return Buffer.concat(rows.map((row) => row.copy)).toString('utf8');
    });
    assert.equal(text, "1\tit's\n2\t\\N\n3\ttab\\there\n");
  });
});

describe('SQLite transactions of the command line', { skip: !STORES.includes('sqlite') }, () => {
  test('take the write lock at BEGIN, so a commit by the server in between cannot fail them', async () => {
    const database = await createTestDatabase('sqlite');
    const cli = openDatabase(database.url);
    await migrateToLatest(cli.db);
    const server = new SqliteDatabase(database.url.slice('sqlite:'.length), { timeout: 0 });
    try {
      const accountId = await seedAccount(cli.db);
      await cli.db.transaction().execute(async (trx) => {
        // A read first, as an import does; then another process tries to write.
        await trx.selectFrom('accounts').select('id').execute();
        assert.throws(
          () => server.prepare('UPDATE accounts SET name = ? WHERE id = ?').run('elsewhere', accountId),
          /database is locked/,
        );
        await trx.updateTable('accounts').set({ name: 'here' }).where('id', '=', accountId).execute();
      });
      assert.equal(server.prepare('SELECT name FROM accounts WHERE id = ?').pluck().get(accountId), 'here');
    } finally {
      server.close();
      await cli.destroy();
      await database.drop();
    }
  });
});
