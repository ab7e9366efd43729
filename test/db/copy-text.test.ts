import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { copyText, copyValue, parseCopyText } from '../../src/db/copy-text.ts';
import { CompiledQuery } from 'kysely';
import { type DatabaseHandle, openDatabase } from '../../src/db/database.ts';
import type { PostgresStore } from '../../src/db/postgres/store.ts';
import { createTestDatabase, STORES, type TestDatabase } from '../helpers.ts';
import { hostileTexts } from './hostile-texts.ts';

/**
 * Rows written as COPY text and read by PostgreSQL's own COPY FROM come back exactly as they were:
 * PostgreSQL's parser is the oracle.
 */

interface Row {
  id: number;
  text: string | null;
  count: number | null;
}
const COLUMNS = ['id', 'text', 'count'] as const;

if (STORES.includes('postgres')) {
  describe('COPY text into PostgreSQL (postgres)', () => {
    let database: TestDatabase;
    let handle: DatabaseHandle;
    const copyInOnPostgres = (table: string, columns: readonly string[], data: string) =>
      (handle.store as PostgresStore).copyInQuery(table, columns, data);
    const copiedOnPostgres = (query: CompiledQuery) => (handle.store as PostgresStore).copiedQuery(query);

    before(async () => {
      database = await createTestDatabase('postgres');
      handle = openDatabase(database.url);
      await sql`CREATE TABLE t (id integer PRIMARY KEY, text text, count integer)`.execute(handle.db);
    });
    after(async () => {
      await handle.destroy();
      await database.drop();
    });

    test('every character, NULL against the empty string and the text \\N, numbers at their limits: stored as they were', async () => {
      const counts = [0, -1, 2147483647, -2147483648, null, 42];
      const rows: Row[] = hostileTexts().map((text, i) => ({
        id: i + 1,
        text,
        count: counts[i % counts.length] ?? null,
      }));
      const result = await handle.db.executeQuery(copyInOnPostgres('t', COLUMNS, copyText(rows, COLUMNS)));
      assert.deepEqual(result.rows, [{ copied: rows.length }]);
      const stored = await sql<Row>`SELECT id, text, count FROM t ORDER BY id`.execute(handle.db);
      assert.deepEqual(stored.rows, rows);
    });

    test("PostgreSQL's own COPY TO text, every character, read back by parseCopyText as it was stored", async () => {
      await sql`CREATE TABLE copied_out (id integer PRIMARY KEY, text text, count integer)`.execute(
        handle.db,
      );
      const rows: Row[] = hostileTexts().map((text, i) => ({
        id: i + 1,
        text,
        count: i % 3 === 0 ? null : -i,
      }));
      await handle.db.executeQuery(copyInOnPostgres('copied_out', COLUMNS, copyText(rows, COLUMNS)));
      const copied = await handle.db.executeQuery(
        copiedOnPostgres(CompiledQuery.raw('SELECT id, text, count FROM copied_out ORDER BY id', [])),
      );
      const parsed = parseCopyText((copied.rows[0]?.copy ?? Buffer.alloc(0)).toString('utf8'));
      assert.deepEqual(
        parsed,
        rows.map((row) => [String(row.id), row.text, row.count === null ? null : String(row.count)]),
      );
    });

    test('a row that breaks a constraint fails the COPY as PostgreSQL reports it, adds nothing, and the connection goes on', async () => {
      const before = await sql<{ n: string }>`SELECT count(*) AS n FROM t`.execute(handle.db);
      const rows: Row[] = [
        { id: 100_000, text: 'new', count: 1 },
        { id: 1, text: 'taken', count: 2 },
      ];
      await assert.rejects(
        handle.db.executeQuery(copyInOnPostgres('t', COLUMNS, copyText(rows, COLUMNS))),
        (error: unknown) => {
          assert.ok(error instanceof pg.DatabaseError);
          assert.equal(error.code, '23505');
          assert.equal(error.constraint, 't_pkey');
          return true;
        },
      );
      // The pool has one more connection than this test needs: each query may take any of them.
      for (let i = 0; i < 12; i += 1) {
        const after = await sql<{ n: string }>`SELECT count(*) AS n FROM t`.execute(handle.db);
        assert.deepEqual(after.rows, before.rows);
      }
    });
  });
}

describe('COPY text: values', () => {
  test('NULL, numbers and the four characters that must be escaped', () => {
    assert.equal(copyValue(null), '\\N');
    assert.equal(copyValue(undefined), '\\N');
    assert.equal(copyValue(-12), '-12');
    assert.equal(copyValue('a\\b\tc\nd\re'), 'a\\\\b\\tc\\nd\\re');
    assert.equal(copyValue('plain "text", é'), 'plain "text", é');
  });

  test('a number PostgreSQL cannot read is refused, not written', () => {
    assert.throws(() => copyValue(Number.NaN), /not a number PostgreSQL reads/);
    assert.throws(() => copyValue(Number.POSITIVE_INFINITY), /not a number PostgreSQL reads/);
  });

  test('parseCopyText: fields by tabs, \\N as null, escapes undone; a cut row or an unknown escape refused', () => {
    assert.deepEqual(parseCopyText('a\\tb\t\\N\t\\\\N\n\t1\n'), [
      ['a\tb', null, '\\N'],
      ['', '1'],
    ]);
    assert.throws(() => parseCopyText('a\tb'), /ended in the middle of a row/);
    assert.throws(() => parseCopyText('\\x41\n'), /an escape COPY TO does not write/);
  });

  test('rows: columns in the order given, tab-separated, one line each', () => {
    assert.equal(
      copyText(
        [
          { a: 1, b: 'x', c: null },
          { a: 2, b: 'y\tz', c: 'w' },
        ],
        ['c', 'a', 'b'],
      ),
      '\\N\t1\tx\nw\t2\ty\\tz\n',
    );
  });
});
