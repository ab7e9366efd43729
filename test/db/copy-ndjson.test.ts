import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import { CopyToNdjson, type JsonField, objectColumns } from '../../src/db/copy-ndjson.ts';
import { createTestDatabase, STORES, type TestDatabase } from '../helpers.ts';
import { hostileTexts } from './hostile-texts.ts';

/**
 * COPY's text rows turned into NDJSON are the bytes JSON.stringify writes for the same rows. The
 * oracle is independent of the transcoder: PostgreSQL writes the COPY text, and the same rows read
 * through the pg driver go through JSON.stringify.
 */

const FIELDS: JsonField[] = [
  { name: 'id', kind: 'number' },
  { name: 'text', kind: 'string' },
  { name: 'count', kind: 'number' },
];

function transcode(chunks: Buffer[], fields = FIELDS): string {
  const ndjson = new CopyToNdjson(objectColumns(fields));
  const out = chunks.map((chunk) => ndjson.push(chunk));
  ndjson.end();
  return Buffer.concat(out).toString();
}

if (STORES.includes('postgres')) {
  describe('COPY text to NDJSON, against PostgreSQL (postgres)', () => {
    let database: TestDatabase;
    let client: pg.Client;
    let copied: Buffer[];
    let expected: string;

    before(async () => {
      database = await createTestDatabase('postgres');
      client = new pg.Client({ connectionString: database.url });
      await client.connect();
      await client.query('CREATE TABLE t (id integer PRIMARY KEY, text text, count integer)');
      const texts = hostileTexts();
      const counts = [0, -1, 2147483647, -2147483648, null, 42];
      for (const [i, text] of texts.entries()) {
        await client.query('INSERT INTO t VALUES ($1, $2, $3)', [i + 1, text, counts[i % counts.length]]);
      }
      const rows = await client.query<Record<string, unknown>>('SELECT id, text, count FROM t ORDER BY id');
      expected = rows.rows.map((row) => `${JSON.stringify(row)}\n`).join('');
      copied = [];
      const stream = client.query(copyTo('COPY (SELECT id, text, count FROM t ORDER BY id) TO STDOUT'));
      for await (const chunk of stream as AsyncIterable<Buffer>) copied.push(chunk);
    });
    after(async () => {
      await client.end();
      await database.drop();
    });

    test('every character, NULL against the empty string and the text \\N, numbers at their limits: the bytes JSON.stringify writes', () => {
      assert.ok(expected.split('\n').length > 250);
      assert.equal(transcode(copied), expected);
    });

    test('rows cut anywhere between chunks come out the same', () => {
      const whole = Buffer.concat(copied);
      // Every cut within the first rows (escapes, multibyte characters, NULLs), then cuts spread across the rest.
      const cuts = [
        ...Array.from({ length: 400 }, (_, i) => i),
        ...Array.from({ length: 50 }, (_, i) => Math.floor((whole.length * i) / 50)),
      ];
      for (const cut of cuts) {
        assert.equal(
          transcode([whole.subarray(0, cut), whole.subarray(cut)]),
          expected,
          `cut at byte ${cut}`,
        );
      }
      // The first 250 rows (every single character among them), a byte at a time.
      let end = 0;
      for (let row = 0; row < 250; row += 1) end = whole.indexOf(0x0a, end) + 1;
      const bytes = Array.from(whole.subarray(0, end), (byte) => Buffer.from([byte]));
      const lines = expected.split('\n').slice(0, 250);
      assert.equal(transcode(bytes), `${lines.join('\n')}\n`, 'a byte at a time');
    });
  });
}

describe('COPY text to NDJSON: data that COPY TO never writes is refused, not guessed at', () => {
  test('a row with too few or too many columns', () => {
    assert.throws(() => transcode([Buffer.from('1\tx\n')]), /does not have 3 columns/);
    assert.throws(() => transcode([Buffer.from('1\tx\t2\t3\n')]), /does not have 3 columns/);
  });

  test('an escape COPY TO does not write (octal, hex)', () => {
    assert.throws(() => transcode([Buffer.from('1\t\\101\t2\n')]), /escape/);
    assert.throws(() => transcode([Buffer.from('1\t\\x41\t2\n')]), /escape/);
  });

  test('data that ends in the middle of a row', () => {
    assert.throws(() => transcode([Buffer.from('1\tx\t2\n3\ty')]), /in the middle of a row/);
  });

  test('rows as COPY writes them', () => {
    assert.equal(
      transcode([Buffer.from('1\ta\\tb\\\\c\\nd"e\t-7\n2\t\\N\t\\N\n')]),
      `${JSON.stringify({ id: 1, text: 'a\tb\\c\nd"e', count: -7 })}\n${JSON.stringify({ id: 2, text: null, count: null })}\n`,
    );
  });
});

describe('COPY text to NDJSON: each chunk its own size of output', () => {
  test('a chunk that grows six times after chunks that barely grew, and one row across many chunks', () => {
    const plain = Array.from({ length: 200 }, (_, i) => ({ id: i, text: 'x'.repeat(40), count: i }));
    const controls = { id: 200, text: '\u0001'.repeat(5000), count: 1 };
    const long = { id: 201, text: 'y'.repeat(3000), count: 2 };
    const copyRow = (row: { id: number; text: string; count: number }) =>
      `${row.id}\t${row.text}\t${row.count}\n`;
    const longRow = Buffer.from(copyRow(long));
    const chunks = [
      Buffer.from(plain.map(copyRow).join('')),
      Buffer.from(copyRow(controls)),
      // The next row arrives 100 bytes at a time: no chunk but the last ends a row.
      ...Array.from({ length: Math.ceil(longRow.length / 100) }, (_, i) =>
        longRow.subarray(i * 100, i * 100 + 100),
      ),
    ];
    const expected = [...plain, controls, long].map((row) => `${JSON.stringify(row)}\n`).join('');
    assert.equal(transcode(chunks), expected);
  });
});
