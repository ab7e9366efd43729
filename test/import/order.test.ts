import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { INCIDENT_COLUMNS } from '../../src/db/repositories/incidents.ts';
import { importFile } from '../../src/import/import.ts';
import { account, dir, gone, incident, json, minute, ndjson } from './files.ts';
import { bearer, createTestContext, random, STORES, seedKey, type TestContext } from '../helpers.ts';

/**
 * Issue 39: the lists and exports are newest first, so a round trip feeds the import newest first.
 * The same records imported oldest first, newest first or shuffled must leave the same store and
 * the same public answers; only each change's place in the feed follows the file's order. On
 * PostgreSQL a file out of order is ranked before it is written, from its keys read a second time
 * (src/import/import.ts): the cases below cover what that reading and ranking must get right.
 */

const INCIDENTS = 2600;
const accountId = randomUUID();
const departmentId = randomUUID();

/** The records, oldest first: every field set, some incidents sharing a creation time (ordered by id). */
function recordsOldestFirst() {
  const records = Array.from({ length: INCIDENTS }, (_, i) =>
    incident(accountId, i + 1, minute(i - (i % 5 === 1 ? 1 : 0)), {
      description: `Spill near bay ${i % 17}; "quoted" and ünïcode ${i}`,
      severity_likelihood: i % 101,
      severity_impact: (i * 7) % 101,
      severity_score: (i % 101) * ((i * 7) % 101),
      location: `Plant ${i % 3}`,
      incident_date: minute(i).slice(0, 10),
      updated_at: minute(i + 30),
    }),
  );
  return records.sort((a, b) =>
    a.created_at !== b.created_at ? (a.created_at < b.created_at ? -1 : 1) : a.id < b.id ? -1 : 1,
  );
}

const header = [
  account(accountId),
  { type: 'department', id: departmentId, account_id: accountId, name: 'Warehouse', created_at: minute(0) },
];

/** An NDJSON file of these lines, as they are. */
function lines(text: string[]): string {
  const path = join(dir, `${randomUUID()}.ndjson`);
  writeFileSync(path, text.join('\n'));
  return path;
}

function shuffled<T>(items: T[]): T[] {
  const next = random(39);
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i -= 1) {
    const j = Math.floor(next() * (i + 1));
    [copy[i], copy[j]] = [copy[j] as T, copy[i] as T];
  }
  return copy;
}

interface Change {
  type: string;
  op: string;
  id: string;
  object: unknown;
}

/** What a store holds and answers after an import: rows, block counts, every page and the feed. */
async function observe(ctx: TestContext) {
  // Every column but the feed's stamps: each change's seq follows the file's order, its time the clock.
  const incidents = await ctx.db
    .selectFrom('incidents')
    .select([...INCIDENT_COLUMNS, 'account_id', 'position'])
    .orderBy('id')
    .execute();
  const blocks = await ctx.db.selectFrom('incident_blocks').selectAll().orderBy('block').execute();
  const accountRow = await ctx.db
    .selectFrom('accounts')
    .select(['incident_count', 'data_version'])
    .where('id', '=', accountId)
    .executeTakeFirstOrThrow();
  const { rawKey } = await seedKey(ctx.db, accountId);
  const pages: unknown[] = [];
  for (let page = 1; ; page += 1) {
    const response = await ctx.app.inject({
      url: `/api/v1/public/incidents?limit=200&page=${page}`,
      headers: bearer(rawKey),
    });
    assert.equal(response.statusCode, 200);
    const { data } = response.json();
    if (data.data.length === 0) break;
    pages.push(data);
  }
  const changes = new Map<string, Change>();
  let seqs = 0;
  for (let cursor = ''; ;) {
    const response = await ctx.app.inject({
      url: `/api/v1/public/changes?limit=1000${cursor}`,
      headers: bearer(rawKey),
    });
    assert.equal(response.statusCode, 200);
    const { data } = response.json();
    for (const { type, op, id, object } of data.data as Change[]) changes.set(id, { type, op, id, object });
    seqs += data.data.length;
    if (!data.has_more) break;
    cursor = `&cursor=${data.next_cursor}`;
  }
  assert.equal(seqs, changes.size, 'each record once in the feed');
  return { incidents, blocks, accountRow, pages, changes };
}

for (const store of STORES) {
  describe(`import in any order (${store})`, () => {
    const oldest = recordsOldestFirst();
    const orders = {
      'newest first': ndjson([...header, ...[...oldest].reverse()]),
      shuffled: ndjson([...header, ...shuffled(oldest)]),
      'newest first, .json': json({
        accounts: [header[0]],
        departments: [header[1]],
        incidents: [...oldest].reverse(),
      }),
      'shuffled, .json': json({
        accounts: [header[0]],
        departments: [header[1]],
        incidents: shuffled(oldest),
      }),
      // Written in order until the first batches are in, then shuffled: too late to rank first.
      'in order, then shuffled after 2,000 records': ndjson([
        ...header,
        ...oldest.slice(0, 2100),
        ...shuffled(oldest.slice(2100)),
      ]),
      // One line gives its creation time twice: the first one, which a reading of the bytes could
      // take, is not the one parsing keeps (the last).
      'shuffled, a key given twice': lines([
        ...header.map((record) => JSON.stringify(record)),
        ...shuffled(oldest).map((record, i) =>
          i === 7
            ? JSON.stringify(record).replace('{', `{"created_at":"${minute(INCIDENTS * 3)}",`)
            : JSON.stringify(record),
        ),
      ]),
    };
    let reference: Awaited<ReturnType<typeof observe>>;
    const contexts: TestContext[] = [];
    const fresh = async () => {
      const ctx = await createTestContext(store);
      contexts.push(ctx);
      return ctx;
    };

    before(async () => {
      const ctx = await fresh();
      await importFile(ctx.commandLineDb, ndjson([...header, ...oldest]));
      reference = await observe(ctx);
      // Dense ranks: the reference is right, not only equal.
      assert.deepEqual(
        reference.incidents
          .map((row) => row.position)
          .sort((a, b) => a - b)
          .slice(0, 3),
        [1, 2, 3],
      );
      assert.equal(reference.pages.length, Math.ceil(INCIDENTS / 200));
    });
    after(() => Promise.all(contexts.map((ctx) => ctx.close())));

    /** A store after two imports in order, observed: what the same records in any order must give. */
    const inOrder = async (first: object[], second: object[]) => {
      const ctx = await fresh();
      await importFile(ctx.commandLineDb, ndjson(first));
      await importFile(ctx.commandLineDb, ndjson(second));
      return observe(ctx);
    };
    /**
     * The same store and answers. With `holesMayFill`, positions may differ where one import
     * re-ranked an account that the other left a deletion's hole in (re-ranking fills holes), but
     * every answer must be the same.
     */
    const same = (
      seen: Awaited<ReturnType<typeof observe>>,
      expected: Awaited<ReturnType<typeof observe>>,
      { holesMayFill = false } = {},
    ) => {
      const rows = (observed: typeof seen) =>
        holesMayFill ? observed.incidents.map(({ position: _, ...row }) => row) : observed.incidents;
      assert.deepEqual(rows(seen), rows(expected));
      if (!holesMayFill) assert.deepEqual(seen.blocks, expected.blocks);
      assert.deepEqual(seen.accountRow, expected.accountRow);
      assert.deepEqual(seen.pages, expected.pages);
      assert.deepEqual(seen.changes, expected.changes);
    };

    for (const [order, file] of Object.entries(orders)) {
      test(`${order}: the same rows, positions, pages and changes as oldest first`, async () => {
        const ctx = await fresh();
        const summary = await importFile(ctx.commandLineDb, file);
        assert.equal(summary.incident, INCIDENTS);
        same(await observe(ctx), reference);
      });
    }

    test('shuffled into an account with incidents, with another account and a deletion among them: as in order', async () => {
      const other = randomUUID();
      const first = [...header, account(other), ...oldest.slice(0, 1000)];
      const second = [
        gone('incident', oldest[10]?.id as string, accountId),
        ...oldest.slice(1000),
        ...Array.from({ length: 300 }, (_, i) => incident(other, 5000 + i, minute(i * 3))),
      ];
      const expected = await inOrder(first, second);
      const ctx = await fresh();
      await importFile(ctx.commandLineDb, ndjson(first));
      await importFile(ctx.commandLineDb, ndjson(shuffled(second)));
      // SQLite re-ranks a shuffled file after writing it, which fills the deletion's hole;
      // PostgreSQL ranks it before, and writes each incident where the file in order puts it.
      same(await observe(ctx), expected, { holesMayFill: store === 'sqlite' });
    });

    test('shuffled with an update of a stored incident that makes it the newest: as in order', async () => {
      const first = [...header, ...oldest.slice(0, 1000)];
      const moved = { ...oldest[20], created_at: minute(INCIDENTS * 2), status: 'closed' };
      const second = [...oldest.slice(1000), moved];
      const expected = await inOrder(first, second);
      const ctx = await fresh();
      await importFile(ctx.commandLineDb, ndjson(first));
      await importFile(ctx.commandLineDb, ndjson(shuffled(second)));
      same(await observe(ctx), expected);
    });

    test('newest first followed by other records: the positions left empty are counted, pages stay right', async () => {
      const ctx = await fresh();
      const other = randomUUID();
      const newestFirst = [...oldest].reverse();
      // Two accounts newest first one after the other, then a line of another type: the first
      // account is placed below room for the second's incidents, which stay empty.
      const second = newestFirst.slice(0, 300).map((record, i) => ({
        ...record,
        id: randomUUID(),
        account_id: other,
        incident_number: `INC-2025-${9000 + i}`,
      }));
      await importFile(
        ctx.commandLineDb,
        ndjson([
          ...header,
          account(other),
          ...newestFirst,
          ...second,
          { type: 'department', id: randomUUID(), account_id: other, name: 'Yard' },
        ]),
      );
      const seen = await observe(ctx);
      assert.deepEqual(seen.pages, reference.pages);
      const holes = seen.blocks.filter((block) => block.account_id === accountId);
      assert.ok(holes.length > 0, 'the empty positions are listed as holes');
      // And the next import in order goes on from there.
      const later = incident(accountId, 9999, minute(INCIDENTS + 10));
      await importFile(ctx.commandLineDb, ndjson([later]));
      const { rawKey } = await seedKey(ctx.db, accountId);
      const first = (
        await ctx.app.inject({ url: '/api/v1/public/incidents?limit=1', headers: bearer(rawKey) })
      ).json().data;
      assert.equal(first.pagination.total, INCIDENTS + 1);
      assert.equal(first.data[0].id, later.id);
      const last = (
        await ctx.app.inject({
          url: `/api/v1/public/incidents?limit=1&page=${INCIDENTS + 1}`,
          headers: bearer(rawKey),
        })
      ).json().data;
      assert.equal(last.data[0].id, oldest[0]?.id);
    });

    test('newest first into an account with incidents and a deletion among them, then an older one: pages stay right', async () => {
      const ctx = await fresh();
      await importFile(ctx.commandLineDb, ndjson([...header, ...oldest.slice(0, 1000)]));
      const rest = oldest.slice(1000).reverse();
      // Newest first, with a deletion of a stored incident among them.
      const mixed = [
        ...rest.slice(0, 500),
        gone('incident', oldest[10]?.id as string, accountId),
        ...rest.slice(500),
      ];
      await importFile(ctx.commandLineDb, ndjson(mixed));
      const ids = (seen: Awaited<ReturnType<typeof observe>>) =>
        seen.pages.flatMap((page) => (page as { data: { id: string }[] }).data.map((i) => i.id));
      const expected = oldest
        .filter((_, i) => i !== 10)
        .map((r) => r.id)
        .reverse();
      assert.deepEqual(ids(await observe(ctx)), expected);
      // An incident older than every stored one: the account is ranked again, holes and all.
      const older = { ...oldest[10], id: randomUUID(), created_at: minute(-100) };
      await importFile(ctx.commandLineDb, ndjson([older]));
      const seen = await observe(ctx);
      assert.deepEqual(ids(seen), [...expected, older.id]);
      assert.deepEqual(
        seen.blocks.filter((block) => block.account_id === accountId),
        [],
      );
    });
  });
}
