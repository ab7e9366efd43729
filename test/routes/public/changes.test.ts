import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../../src/db/schema.ts';
import { importFile } from '../../../src/import/import.ts';
import {
  bearer,
  createTestContext,
  random,
  STORES,
  seedAccount,
  seedIncidents,
  seedKey,
  type TestContext,
} from '../../helpers.ts';
import { account as accountRecord, gone, incident, minute, ndjson } from '../../import/files.ts';

const FEED = '/api/v1/public/changes';
const T = '2025-03-01T10:00:00.000Z';

interface Change {
  seq: number;
  type: 'incident' | 'user' | 'department' | 'location';
  op: 'upsert' | 'delete';
  id: string;
  object: Record<string, unknown> | null;
  changed_at: string;
}

interface Page {
  data: Change[];
  next_cursor: string;
  has_more: boolean;
}

type Stamp = { change_seq: number; changed_at: string };
type Write = (trx: Transaction<Database>, stamp: Stamp) => Promise<void>;

/**
 * Commits writes as every writer of the data model does: in one transaction, the account's
 * data_version moves on by one per write and each write's row gets one of those seqs, in order.
 */
async function commit(db: Kysely<Database>, accountId: string, ...writes: Write[]): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const { data_version: last } = await trx
      .updateTable('accounts')
      .set((eb) => ({ data_version: eb('data_version', '+', writes.length) }))
      .where('id', '=', accountId)
      .returning('data_version')
      .executeTakeFirstOrThrow();
    const changedAt = new Date().toISOString();
    for (const [i, write] of writes.entries()) {
      await write(trx, { change_seq: last - writes.length + i + 1, changed_at: changedAt });
    }
  });
}

function userRow(accountId: string, name: string, fields: { active?: number; vendor_support?: number } = {}) {
  return {
    id: randomUUID(),
    account_id: accountId,
    name,
    email: `${name.toLowerCase()}-${randomUUID().slice(0, 6)}@example.com`,
    role: 'manager',
    department: 'Operations',
    job_title: null,
    active: fields.active ?? 1,
    vendor_support: fields.vendor_support ?? 0,
    created_at: T,
  };
}

const putUser =
  (row: ReturnType<typeof userRow>): Write =>
  async (trx, stamp) => {
    await trx
      .insertInto('users')
      .values({ ...row, ...stamp })
      .onConflict((oc) => oc.column('id').doUpdateSet({ ...row, ...stamp }))
      .execute();
  };

const putNamed =
  (
    table: 'departments' | 'locations',
    row: { id: string; account_id: string; name: string; active: number },
  ): Write =>
  async (trx, stamp) => {
    const values = { ...row, created_at: T, ...stamp };
    await trx
      .insertInto(table)
      .values(values)
      .onConflict((oc) => oc.column('id').doUpdateSet(values))
      .execute();
  };

/** An update of an existing incident that leaves its place in the list as it is. */
const updateIncident =
  (id: string, fields: { description?: string | null; status?: string } = {}): Write =>
  async (trx, stamp) => {
    await trx
      .updateTable('incidents')
      .set({ ...fields, ...stamp })
      .where('id', '=', id)
      .execute();
  };

const deleteIncident =
  (accountId: string, id: string): Write =>
  async (trx, stamp) => {
    await trx.deleteFrom('incidents').where('id', '=', id).execute();
    await trx
      .insertInto('incident_tombstones')
      .values({ id, account_id: accountId, ...stamp })
      .execute();
  };

/** The state a client builds from the feed alone: every upsert's object, keyed by type and id. */
function applyChanges(replica: Map<string, unknown>, changes: Change[]): void {
  for (const change of changes) {
    const key = `${change.type}:${change.id}`;
    if (change.op === 'upsert') replica.set(key, change.object);
    else replica.delete(key);
  }
}

for (const store of STORES) {
  describe(`changes feed (${store})`, () => {
    let ctx: TestContext;

    before(async () => {
      ctx = await createTestContext(store);
    });
    after(() => ctx.close());

    /** A new account with a key and its incidents, seqs 1 to `incidents`. */
    async function account(
      incidents = 0,
    ): Promise<{ accountId: string; rawKey: string; incidentIds: string[] }> {
      const accountId = await seedAccount(ctx.db);
      const { rawKey } = await seedKey(ctx.db, accountId);
      const rows = await seedIncidents(ctx.db, accountId, incidents, (i) => ({
        description: i % 3 === 0 ? null : `Incident ${i + 1}`,
        severity_likelihood: i % 4 === 0 ? null : (i % 5) + 1,
      }));
      return { accountId, rawKey, incidentIds: rows.map((row) => row.id) };
    }

    const get = (rawKey: string, query = '') =>
      ctx.app.inject({ method: 'GET', url: `${FEED}${query}`, headers: bearer(rawKey) });

    async function page(rawKey: string, query = ''): Promise<Page> {
      const res = await get(rawKey, query);
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json();
      assert.equal(body.error, false);
      assert.equal(res.body, JSON.stringify(body), 'the page is written as JSON.stringify writes it');
      return body.data;
    }

    /**
     * Follows next_cursor from `cursor` until has_more is false; `between` runs between two pages
     * (changes committing while the client walks). Returns the pages' changes and the last cursor.
     */
    async function walk(
      rawKey: string,
      {
        cursor,
        limit,
        between,
      }: { cursor?: string; limit: number; between?: (changes: Change[], n: number) => Promise<void> },
    ): Promise<{ pages: Change[][]; cursor: string }> {
      const pages: Change[][] = [];
      let next = cursor;
      for (let n = 0; ; n++) {
        const params = new URLSearchParams({ limit: String(limit) });
        if (next !== undefined) params.set('cursor', next);
        const body = await page(rawKey, `?${params}`);
        pages.push(body.data);
        next = body.next_cursor;
        if (!body.has_more) return { pages, cursor: next };
        if (between !== undefined) await between(body.data, n);
        assert.ok(pages.length < 1000, 'the walk ends');
      }
    }

    /** What the list endpoints show, keyed like `applyChanges`'s replica. */
    async function lists(rawKey: string): Promise<Map<string, unknown>> {
      const shown = new Map<string, unknown>();
      const list = async (url: string) => {
        const res = await ctx.app.inject({ method: 'GET', url, headers: bearer(rawKey) });
        assert.equal(res.statusCode, 200);
        return res.json().data;
      };
      for (let p = 1; ; p++) {
        const { data, pagination } = await list(`/api/v1/public/incidents?limit=200&page=${p}`);
        for (const incident of data) shown.set(`incident:${incident.id}`, incident);
        if (p >= pagination.pages) break;
      }
      for (const [type, path] of [
        ['user', 'users'],
        ['department', 'departments'],
        ['location', 'locations'],
      ] as const) {
        for (const record of await list(`/api/v1/public/${path}`)) shown.set(`${type}:${record.id}`, record);
      }
      return shown;
    }

    /** Asserts the replica equals the lists, objects byte for byte as the lists serialize them. */
    async function assertReplicaEqualsLists(rawKey: string, replica: Map<string, unknown>): Promise<void> {
      const shown = await lists(rawKey);
      assert.deepEqual([...replica.keys()].sort(), [...shown.keys()].sort());
      for (const [key, object] of shown)
        assert.equal(JSON.stringify(replica.get(key)), JSON.stringify(object), key);
    }

    test('a walk from no cursor is a full sync: the replica equals the lists, oldest change first', async () => {
      const { accountId, rawKey, incidentIds } = await account(23);
      const other = await account(5);
      await commit(
        ctx.db,
        accountId,
        // Text that JSON escapes, or writes in more than one byte per character.
        updateIncident(incidentIds[4]!, { description: 'a "quote", \\ \n\t\u0001 é 💥 \u2028 end' }),
        putUser(userRow(accountId, 'Alice')),
        // An email no format check would pass (imports take it): shown as the list shows it.
        putUser({ ...userRow(accountId, 'Bob'), email: 'bob at example' }),
        putUser(userRow(accountId, 'Ivan', { active: 0 })),
        putUser(userRow(accountId, 'Vera', { vendor_support: 1 })),
        putNamed('departments', { id: randomUUID(), account_id: accountId, name: 'Ops', active: 1 }),
        putNamed('departments', { id: randomUUID(), account_id: accountId, name: 'Closed', active: 0 }),
        putNamed('locations', { id: randomUUID(), account_id: accountId, name: 'Plant A', active: 1 }),
      );
      await commit(ctx.db, other.accountId, putUser(userRow(other.accountId, 'Otto')));

      const { pages } = await walk(rawKey, { limit: 7 });
      const changes = pages.flat();
      assert.equal(changes.length, 30);
      assert.deepEqual(
        pages.map((p) => p.length),
        [7, 7, 7, 7, 2],
      );
      const seqs = changes.map((c) => c.seq);
      assert.deepEqual(
        seqs,
        [...seqs].sort((a, b) => a - b),
        'oldest change first',
      );
      assert.equal(new Set(changes.map((c) => `${c.type}:${c.id}`)).size, changes.length, 'each record once');
      for (const change of changes) {
        assert.deepEqual(Object.keys(change), ['seq', 'type', 'op', 'id', 'object', 'changed_at']);
        assert.match(change.changed_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
        if (change.op === 'delete') assert.equal(change.object, null);
      }
      // Records outside the public view are deletions, so a replica that never saw them is right.
      const deleted = changes.filter((c) => c.op === 'delete').map((c) => `${c.type}`);
      assert.deepEqual(deleted.sort(), ['department', 'user', 'user']);

      const replica = new Map<string, unknown>();
      applyChanges(replica, changes);
      await assertReplicaEqualsLists(rawKey, replica);
    });
    /** A cursor at the account's head, from `cursor=latest`. */
    async function latest(rawKey: string): Promise<string> {
      const body = await page(rawKey, '?cursor=latest');
      assert.deepEqual(body.data, []);
      assert.equal(body.has_more, false);
      return body.next_cursor;
    }

    test('compacted: a record changed twice since the cursor comes once, in its latest state', async () => {
      const { accountId, rawKey, incidentIds } = await account(3);
      const [first, second] = incidentIds as [string, string];
      const cursor = await latest(rawKey);
      await commit(ctx.db, accountId, updateIncident(first, { description: 'first edit' }));
      await commit(ctx.db, accountId, updateIncident(second, { status: 'closed' }));
      await commit(ctx.db, accountId, updateIncident(first, { description: 'second edit' }));

      const { pages } = await walk(rawKey, { cursor, limit: 100 });
      const changes = pages.flat();
      assert.deepEqual(
        changes.map((c) => [c.id, c.op, c.object?.description, c.object?.status]),
        [
          [second, 'upsert', 'Incident 2', 'closed'],
          [first, 'upsert', 'second edit', 'open'],
        ],
      );
      assert.ok(changes[0]!.seq < changes[1]!.seq);
      const incident = (
        await ctx.app.inject({ url: `/api/v1/public/incidents/${first}`, headers: bearer(rawKey) })
      ).json();
      assert.deepEqual(changes[1]!.object, incident.data);
    });

    test('deleted incidents and records leaving the view are deletes with a null object; coming back is an upsert', async () => {
      const { accountId, rawKey, incidentIds } = await account(2);
      const alice = userRow(accountId, 'Alice');
      const vera = userRow(accountId, 'Vera');
      const ops = { id: randomUUID(), account_id: accountId, name: 'Ops', active: 1 };
      const site = { id: randomUUID(), account_id: accountId, name: 'Site', active: 1 };
      await commit(
        ctx.db,
        accountId,
        putUser(alice),
        putUser(vera),
        putNamed('departments', ops),
        putNamed('locations', site),
      );
      const cursor = await latest(rawKey);

      await commit(
        ctx.db,
        accountId,
        deleteIncident(accountId, incidentIds[0]!),
        putUser({ ...alice, active: 0 }),
        putUser({ ...vera, vendor_support: 1 }),
        putNamed('departments', { ...ops, active: 0 }),
        putNamed('locations', { ...site, active: 0 }),
      );
      const gone = await page(rawKey, `?cursor=${cursor}`);
      assert.deepEqual(
        gone.data.map((c) => [c.type, c.op, c.id, c.object]),
        [
          ['incident', 'delete', incidentIds[0], null],
          ['user', 'delete', alice.id, null],
          ['user', 'delete', vera.id, null],
          ['department', 'delete', ops.id, null],
          ['location', 'delete', site.id, null],
        ],
      );
      assert.equal(gone.has_more, false);

      await commit(ctx.db, accountId, putUser(alice), putNamed('locations', site));
      const back = await page(rawKey, `?cursor=${gone.next_cursor}`);
      const users = (await ctx.app.inject({ url: '/api/v1/public/users', headers: bearer(rawKey) })).json()
        .data;
      const locations = (
        await ctx.app.inject({ url: '/api/v1/public/locations', headers: bearer(rawKey) })
      ).json().data;
      assert.deepEqual(
        back.data.map((c) => [c.type, c.op, c.object]),
        [
          ['user', 'upsert', users[0]],
          ['location', 'upsert', locations[0]],
        ],
      );
    });

    test('a walk never delivers a record twice in one pass, whatever commits between its pages', async () => {
      const { accountId, rawKey, incidentIds } = await account(30);
      const delivered = new Map<string, number>();
      /** Records the test changed after the walk had delivered them: they may come once more. */
      const changedAfterDelivery = new Set<string>();
      const replica = new Map<string, unknown>();
      let edits = 0;
      const { pages } = await walk(rawKey, {
        limit: 4,
        between: async (changes, n) => {
          for (const change of changes) delivered.set(`${change.type}:${change.id}`, change.seq);
          if (n > 12) return;
          // One incident already delivered and one not yet reached change, and a user is added.
          const seen = incidentIds.filter((id) => delivered.has(`incident:${id}`));
          const ahead = incidentIds.filter((id) => !delivered.has(`incident:${id}`));
          const writes = [putUser(userRow(accountId, `User ${n}`))];
          if (seen.length > 0) {
            const id = seen[n % seen.length]!;
            changedAfterDelivery.add(`incident:${id}`);
            writes.push(updateIncident(id, { description: `edit ${(edits += 1)}` }));
          }
          if (ahead.length > 1)
            writes.push(updateIncident(ahead[ahead.length - 1]!, { status: `moved ${n}` }));
          await commit(ctx.db, accountId, ...writes);
        },
      });
      const changes = pages.flat();
      const seqs = changes.map((c) => c.seq);
      assert.deepEqual(
        seqs,
        [...new Set(seqs)].sort((a, b) => a - b),
        'pages never overlap',
      );
      const counts = new Map<string, number>();
      for (const change of changes)
        counts.set(`${change.type}:${change.id}`, (counts.get(`${change.type}:${change.id}`) ?? 0) + 1);
      for (const [key, count] of counts) {
        if (count > 1)
          assert.ok(changedAfterDelivery.has(key), `${key} came ${count} times without changing in between`);
      }
      applyChanges(replica, changes);
      await assertReplicaEqualsLists(rawKey, replica);
    });

    test('randomized: imports, updates, deletions and reactivations between pages; a replica from the feed, and one from the exports and then the feed, equal the lists', async () => {
      // FEED_SEED replays another sequence.
      const next = random(Number(process.env.FEED_SEED ?? (store === 'sqlite' ? 3 : 5)));
      const pick = <T>(items: T[]): T => items[Math.floor(next() * items.length)]!;
      const accountId = randomUUID();
      type ImportRecord = { type: string; id: string } & Record<string, unknown>;
      /** The latest record imported for each type and id, deleted or not. */
      const records = new Map<string, ImportRecord>();
      /** When the test imported each record: the number of pages the walks had received by then. */
      const touches = new Map<string, number[]>();
      let pagesSeen = 0;
      const deleted = new Set<string>();
      let incidents = 0;
      const newIncident = () => {
        incidents += 1;
        return incident(accountId, incidents, minute(Math.floor(next() * 5000)), {
          description: `v${incidents}`,
        });
      };
      const person = (i: number) => ({
        type: 'user',
        id: randomUUID(),
        account_id: accountId,
        name: `Person ${i}`,
        email: `person-${randomUUID()}@example.com`,
        role: 'employee',
        active: true,
        vendor_support: false,
        created_at: minute(i),
      });
      const place = (type: string, i: number) => ({
        type,
        id: randomUUID(),
        account_id: accountId,
        name: `${type} ${i}`,
        active: true,
        created_at: minute(i),
      });

      /** Imports `batch`, remembering what each record now is and when it was imported. */
      const load = async (batch: ImportRecord[]): Promise<void> => {
        await importFile(ctx.commandLineDb, ndjson(batch));
        for (const record of batch) {
          const key = `${record.type}:${record.id}`;
          touches.set(key, [...(touches.get(key) ?? []), pagesSeen]);
          if (record.type === 'account') continue;
          if (record.deleted === true) deleted.add(key);
          else {
            deleted.delete(key);
            records.set(key, record);
          }
        }
      };
      /** A few random changes to different records: new, changed, deleted, back, or imported as they are. */
      const randomBatch = (): ImportRecord[] => {
        const batch = new Map<string, ImportRecord>();
        const size = 1 + Math.floor(next() * 6);
        for (let k = 0; k < size; k++) {
          const live = [...records.entries()].filter(([key]) => !deleted.has(key));
          const [key, record] = pick(live);
          const kind = Math.floor(next() * 6);
          if (kind === 0) {
            const fresh = newIncident();
            batch.set(`incident:${fresh.id}`, fresh);
          } else if (kind === 1) {
            const changed =
              record.type === 'incident'
                ? { ...record, status: pick(['open', 'closed', 'investigating']), description: `edit ${k}` }
                : record.type === 'user'
                  ? { ...record, active: next() < 0.7, vendor_support: next() < 0.2 }
                  : { ...record, name: `${record.name}+`, active: next() < 0.7 };
            batch.set(key, changed);
          } else if (kind === 2) {
            batch.set(key, gone(record.type, record.id, accountId));
          } else if (kind === 3 && deleted.size > 0) {
            const back = pick([...deleted]);
            batch.set(back, {
              ...records.get(back)!,
              ...(back.startsWith('incident:') ? {} : { active: true }),
            });
          } else {
            batch.set(key, record);
          }
        }
        return [...batch.values()];
      };

      await load([
        accountRecord(accountId),
        ...Array.from({ length: 40 }, newIncident),
        ...Array.from({ length: 6 }, (_, i) => person(i)),
        ...Array.from({ length: 3 }, (_, i) => place('department', i)),
        ...Array.from({ length: 3 }, (_, i) => place('location', i)),
      ]);
      const { rawKey } = await seedKey(ctx.db, accountId);

      /** The page of each record's last delivery, counted over all walks. */
      const delivered = new Map<string, number>();
      const replica = new Map<string, unknown>();
      /** Walks from `cursor` to the end, importing a random batch between pages until page `rounds`. */
      const follow = async (cursor: string | undefined, rounds: number) => {
        const first = pagesSeen;
        const { pages, cursor: last } = await walk(rawKey, {
          cursor,
          limit: 1 + Math.floor(next() * 9),
          between: async (_changes, n) => {
            pagesSeen = first + n + 1;
            if (pagesSeen <= rounds) await load(randomBatch());
          },
        });
        pagesSeen = first + pages.length;
        for (const [n, changes] of pages.entries()) {
          for (const change of changes) {
            const key = `${change.type}:${change.id}`;
            const before = delivered.get(key);
            const page = first + n + 1;
            if (before !== undefined) {
              const changedSince = (touches.get(key) ?? []).some((t) => t >= before && t < page);
              assert.ok(changedSince, `${key} came again on page ${page} unchanged since page ${before}`);
            }
            delivered.set(key, page);
          }
        }
        const seqs = pages.flat().map((c) => c.seq);
        assert.deepEqual(
          seqs,
          [...seqs].sort((a, b) => a - b),
          'pages never overlap',
        );
        applyChanges(replica, pages.flat());
        await assertReplicaEqualsLists(rawKey, replica);
        return last;
      };

      // A full sync while imports commit, then catching up after more of them.
      const synced = await follow(undefined, 15);
      for (let i = 0; i < 3; i++) await load(randomBatch());
      await follow(synced, pagesSeen + 6);

      // Another client: the four exports, with imports committing between them, then the feed
      // from the first export's X-Changes-Cursor while more imports commit.
      const fromExports = new Map<string, unknown>();
      let exportCursor: string | undefined;
      for (const type of ['incident', 'user', 'department', 'location']) {
        const res = await ctx.app.inject({
          url: `/api/v1/public/exports/${type}s.ndjson`,
          headers: bearer(rawKey),
        });
        assert.equal(res.statusCode, 200);
        exportCursor ??= String(res.headers['x-changes-cursor']);
        for (const line of res.body.split('\n').filter(Boolean)) {
          const record = JSON.parse(line) as { id: string };
          fromExports.set(`${type}:${record.id}`, record);
        }
        await load(randomBatch());
      }
      let between = 0;
      const { pages } = await walk(rawKey, {
        cursor: exportCursor,
        limit: 1 + Math.floor(next() * 9),
        between: async () => {
          between += 1;
          if (between <= 6) await load(randomBatch());
        },
      });
      applyChanges(fromExports, pages.flat());
      await assertReplicaEqualsLists(rawKey, fromExports);
    });

    test('cursor=latest: no changes, a cursor at the head from which the next change follows', async () => {
      const { accountId, rawKey, incidentIds } = await account(4);
      const cursor = await latest(rawKey);
      const quiet = await page(rawKey, `?cursor=${cursor}`);
      assert.deepEqual(quiet, { data: [], next_cursor: quiet.next_cursor, has_more: false });
      await commit(ctx.db, accountId, updateIncident(incidentIds[2]!, { status: 'closed' }));
      const next = await page(rawKey, `?cursor=${quiet.next_cursor}`);
      assert.deepEqual(
        next.data.map((c) => c.id),
        [incidentIds[2]],
      );
      assert.equal(next.has_more, false);
    });

    test('limit: default 100, at most 1000, anything but a whole number of at least 1 is 100', async () => {
      const { rawKey } = await account(1005);
      const sizes: Record<string, number> = {
        '': 100,
        '?limit=1': 1,
        '?limit=250': 250,
        '?limit=1000': 1000,
        '?limit=5000': 1000,
        '?limit=0': 100,
        '?limit=-3': 100,
        '?limit=2.5': 100,
        '?limit=abc': 100,
        '?limit=1&limit=2': 100,
        '?limit=99999999999999999999': 1000,
      };
      for (const [query, size] of Object.entries(sizes)) {
        const body = await page(rawKey, query);
        assert.equal(body.data.length, size, query);
        assert.equal(body.has_more, true, query);
      }
    });

    test("a garbled, altered, repeated or other account's cursor is 400 INVALID_CURSOR, counted", async () => {
      const { rawKey } = await account(3);
      const other = await account(3);
      const mine = (await page(rawKey, '?limit=1')).next_cursor;
      const theirs = (await page(other.rawKey, '?limit=1')).next_cursor;
      const middle = Math.floor(mine.length / 2);
      const flipped = `${mine.slice(0, middle)}${mine[middle] === 'A' ? 'B' : 'A'}${mine.slice(middle + 1)}`;
      const bad = [
        'abc',
        'not a cursor',
        '%ff',
        flipped,
        mine.slice(0, -1),
        `${mine}A`,
        theirs,
        `${mine}&cursor=${mine}`,
        'LATEST',
      ];
      let remaining = Number((await get(rawKey)).headers['x-ratelimit-remaining']);
      for (const cursor of bad) {
        const res = await get(rawKey, `?cursor=${cursor}`);
        assert.equal(res.statusCode, 400, cursor);
        assert.deepEqual(Object.keys(res.json()), ['error', 'message']);
        assert.equal(res.json().error, 'INVALID_CURSOR');
        assert.match(res.json().message, /without a cursor/);
        remaining -= 1;
        assert.equal(Number(res.headers['x-ratelimit-remaining']), remaining, 'counted like any request');
      }
      assert.equal((await get(rawKey, `?cursor=${mine}`)).statusCode, 200);
      assert.equal((await get(rawKey, '?cursor=')).statusCode, 200, 'an empty cursor is no cursor');
    });

    test('a cursor past the purged deletions, or ahead of the data (a restore), is 410 CURSOR_EXPIRED', async () => {
      const { accountId, rawKey, incidentIds } = await account(5);
      const early = (await page(rawKey, '?limit=2')).next_cursor;
      const head = await latest(rawKey);
      const setAccount = (values: { changes_purged_seq?: number; data_version?: number }) =>
        ctx.db.updateTable('accounts').set(values).where('id', '=', accountId).execute();
      const expectExpired = async (cursor: string) => {
        const res = await get(rawKey, `?cursor=${cursor}`);
        assert.equal(res.statusCode, 410);
        assert.deepEqual(Object.keys(res.json()), ['error', 'message']);
        assert.equal(res.json().error, 'CURSOR_EXPIRED');
        assert.match(res.json().message, /without a cursor/);
        assert.ok(res.headers['x-ratelimit-remaining'] !== undefined, 'counted like any request');
      };

      // Tombstones purged up to seq 4: a cursor at 2 may have missed one, a cursor at the head (5)
      // has not.
      await setAccount({ changes_purged_seq: 4 });
      await expectExpired(early);
      assert.equal((await get(rawKey, `?cursor=${head}`)).statusCode, 200);
      assert.equal((await get(rawKey)).statusCode, 200, 'a full sync needs no tombstones');

      await commit(ctx.db, accountId, updateIncident(incidentIds[0]!));
      const ahead = await latest(rawKey);
      await setAccount({ data_version: 5 });
      await expectExpired(ahead);
    });

    test('a cursor older than CHANGES_RETENTION_DAYS is 410 CURSOR_EXPIRED; a fresh one is not', async () => {
      // 0.00003 days: 2.6 s. Cursors hold whole seconds, so a cursor checked at once may already
      // look a second old: the retention must be well above that.
      const short = await createTestContext(store, { CHANGES_RETENTION_DAYS: '0.00003' });
      try {
        const { rawKey } = await seedKey(short.db, await seedAccount(short.db));
        const feed = (query: string) =>
          short.app.inject({ method: 'GET', url: `${FEED}${query}`, headers: bearer(rawKey) });
        const cursor = (await feed('?cursor=latest')).json().data.next_cursor;
        assert.equal((await feed(`?cursor=${cursor}`)).statusCode, 200);
        await sleep(4100);
        const expired = await feed(`?cursor=${cursor}`);
        assert.equal(expired.statusCode, 410);
        assert.equal(expired.json().error, 'CURSOR_EXPIRED');
        const fresh = (await feed('')).json().data.next_cursor;
        assert.equal((await feed(`?cursor=${fresh}`)).statusCode, 200);
      } finally {
        await short.close();
      }
    });

    test('the response: 200 with rate-limit headers, counted; HEAD as GET; 401 and 403 before anything', async () => {
      const { accountId, rawKey } = await account(1);
      const first = await get(rawKey);
      const second = await get(rawKey);
      assert.equal(second.statusCode, 200);
      assert.match(String(second.headers['content-type']), /^application\/json/);
      assert.equal(second.headers['x-ratelimit-limit'], '1000');
      assert.equal(
        Number(second.headers['x-ratelimit-remaining']),
        Number(first.headers['x-ratelimit-remaining']) - 1,
      );
      assert.ok(Number(second.headers['x-ratelimit-reset']) > Date.now() / 1000);
      // Pages bypass the response cache (src/routes/public/changes.ts): no ETag, no free 304.
      assert.equal(second.headers.etag, undefined);

      const head = await ctx.app.inject({ method: 'HEAD', url: FEED, headers: bearer(rawKey) });
      assert.equal(head.statusCode, 200);
      assert.equal(head.body, '');

      const anonymous = await ctx.app.inject({ method: 'GET', url: FEED });
      assert.equal(anonymous.statusCode, 401);
      assert.equal(anonymous.json().error, 'API_KEY_REQUIRED');
      const unknown = await get(`svc_${'0'.repeat(40)}`);
      assert.equal(unknown.statusCode, 401);
      assert.equal(unknown.json().error, 'API_KEY_INVALID');
      await ctx.db.updateTable('accounts').set({ api_access: 0 }).where('id', '=', accountId).execute();
      const unpaid = await get(rawKey, '?cursor=garbled');
      assert.equal(unpaid.statusCode, 403);
      assert.equal(unpaid.json().error, 'FEATURE_NOT_AVAILABLE');
    });
  });
}
