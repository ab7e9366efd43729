import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { importFile } from '../../src/import/import.ts';
import { accountDataService } from '../../src/services/account-data-service.ts';
import { bearer, createTestContext, random, STORES, seedKey, type TestContext } from '../helpers.ts';
import { account, gone, incident, json, minute, ndjson } from './files.ts';

for (const store of STORES) {
  describe(`import: deletions (${store})`, () => {
    let ctx: TestContext;
    before(async () => {
      ctx = await createTestContext(store);
    });
    after(() => ctx.close());

    const accountRow = (id: string) =>
      ctx.db
        .selectFrom('accounts')
        .select(['incident_count', 'data_version', 'changes_purged_seq', 'created_at'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();

    const get = async (rawKey: string, path: string) => {
      const res = await ctx.app.inject({ url: `/api/v1/public${path}`, headers: bearer(rawKey) });
      return { status: res.statusCode, body: res.json() };
    };

    test('deleted incidents leave total, pages and lookups at once; a tombstone keeps the deletion; importing the file again changes nothing', async () => {
      const accountId = randomUUID();
      const records = Array.from({ length: 10 }, (_, i) => incident(accountId, i + 1, minute(i)));
      await importFile(ctx.commandLineDb, ndjson([account(accountId), ...records]));
      const { rawKey } = await seedKey(ctx.db, accountId);
      // Read once, so that a cached page would be served if the import did not invalidate it.
      assert.equal((await get(rawKey, '/incidents?limit=3&page=2')).body.data.pagination.total, 10);

      const doomed = [records[0]!, records[4]!, records[9]!].map((r) => r.id);
      const deletions = ndjson([
        ...doomed.map((id) => gone('incident', id, accountId)),
        gone('incident', randomUUID(), accountId),
      ]);
      const summary = await importFile(ctx.commandLineDb, deletions);
      // Three were there; the fourth names no incident and deletes nothing.
      assert.deepEqual(summary.deleted, { incident: 3 });

      const remaining = records
        .filter((r) => !doomed.includes(r.id))
        .map((r) => r.id)
        .reverse();
      const page2 = await get(rawKey, '/incidents?limit=3&page=2');
      assert.deepEqual(page2.body.data.pagination, { page: 2, limit: 3, total: 7, pages: 3 });
      assert.deepEqual(
        page2.body.data.data.map((i: { id: string }) => i.id),
        remaining.slice(3, 6),
      );
      const all = await get(rawKey, '/incidents?limit=200');
      assert.deepEqual(
        all.body.data.data.map((i: { id: string }) => i.id),
        remaining,
      );
      assert.deepEqual((await get(rawKey, `/incidents/${doomed[1]}`)).body, {
        error: true,
        message: 'Incident not found',
      });
      const tombstones = await ctx.db
        .selectFrom('incident_tombstones')
        .select(['id', 'change_seq'])
        .where('account_id', '=', accountId)
        .orderBy('change_seq')
        .execute();
      assert.deepEqual(
        tombstones.map((t) => t.id),
        doomed,
      );
      const head = await accountRow(accountId);
      assert.equal(head.incident_count, 7);
      assert.ok((tombstones.at(-1)?.change_seq ?? 0) <= head.data_version);

      // The same file again: nothing is there to delete; the data and the tombstones stay as they were.
      assert.deepEqual((await importFile(ctx.commandLineDb, deletions)).deleted, { incident: 0 });
      assert.deepEqual((await get(rawKey, '/incidents?limit=200')).body.data.data, all.body.data.data);
      assert.deepEqual(
        await ctx.db
          .selectFrom('incident_tombstones')
          .select(['id', 'change_seq'])
          .where('account_id', '=', accountId)
          .orderBy('change_seq')
          .execute(),
        tombstones,
      );

      // Imported again, a deleted incident is back, and its tombstone is gone.
      await importFile(ctx.commandLineDb, ndjson([records[4]!]));
      assert.equal((await get(rawKey, `/incidents/${doomed[1]}`)).status, 200);
      assert.equal((await get(rawKey, '/incidents')).body.data.pagination.total, 8);
      assert.deepEqual(
        (
          await ctx.db
            .selectFrom('incident_tombstones')
            .select('id')
            .where('account_id', '=', accountId)
            .execute()
        )
          .map((t) => t.id)
          .sort(),
        [doomed[0], doomed[2]].sort(),
      );
    });

    test("an account id erased and imported again is paged by its new life's holes, not its earlier one's", async () => {
      const accountId = randomUUID();
      const earlier = Array.from({ length: 10 }, (_, i) => incident(accountId, i + 1, minute(i)));
      await importFile(ctx.commandLineDb, ndjson([account(accountId), ...earlier]));
      await importFile(
        ctx.commandLineDb,
        ndjson([1, 2, 5].map((i) => gone('incident', earlier[i]!.id, accountId))),
      );
      const before = await seedKey(ctx.db, accountId);
      // Paged once with its holes: the instance keeps them under the account's feed position.
      assert.equal((await get(before.rawKey, '/incidents?limit=3&page=2')).status, 200);
      const { data_version: position } = await accountRow(accountId);

      await accountDataService.erase(ctx.db, accountId);
      // The new life, with no holes, brought to the same feed position.
      const now = [account(accountId)];
      await importFile(ctx.commandLineDb, ndjson(now));
      const start = (await accountRow(accountId)).data_version;
      const later = Array.from({ length: position - start }, (_, i) => incident(accountId, i + 1, minute(i)));
      await importFile(ctx.commandLineDb, ndjson(later));
      assert.equal((await accountRow(accountId)).data_version, position, 'the same feed position');

      const after = await seedKey(ctx.db, accountId);
      // Another page than the one read before: not an answer kept whole, the holes are what is asked.
      const page = await get(after.rawKey, '/incidents?limit=4&page=2');
      assert.equal(page.status, 200);
      assert.deepEqual(
        page.body.data.data.map((i: { id: string }) => i.id),
        later
          .map((r) => r.id)
          .reverse()
          .slice(4, 8),
      );
    });

    test('users, departments and locations leave the public lists when deleted and come back when imported active', async () => {
      const accountId = randomUUID();
      const user = {
        type: 'user',
        id: randomUUID(),
        account_id: accountId,
        name: 'Ann',
        email: `${randomUUID()}@example.com`,
        role: 'manager',
      };
      const department = { type: 'department', id: randomUUID(), account_id: accountId, name: 'Plant' };
      const location = { type: 'location', id: randomUUID(), account_id: accountId, name: 'Dock 4' };
      await importFile(ctx.commandLineDb, ndjson([account(accountId), user, department, location]));
      const { rawKey } = await seedKey(ctx.db, accountId);
      for (const path of ['/users', '/departments', '/locations'])
        assert.equal((await get(rawKey, path)).body.data.length, 1);

      const summary = await importFile(
        ctx.commandLineDb,
        ndjson([
          gone('user', user.id, accountId),
          gone('department', department.id, accountId),
          gone('location', location.id, accountId),
        ]),
      );
      assert.deepEqual(summary.deleted, { user: 1, department: 1, location: 1 });
      for (const path of ['/users', '/departments', '/locations'])
        assert.deepEqual((await get(rawKey, path)).body.data, [], path);
      // Deleting them again takes nothing out: they are out already.
      const again = await importFile(
        ctx.commandLineDb,
        ndjson([gone('user', user.id, accountId), gone('location', location.id, accountId)]),
      );
      assert.deepEqual(again.deleted, { user: 0, location: 0 });

      await importFile(ctx.commandLineDb, ndjson([user, department, location]));
      for (const path of ['/users', '/departments', '/locations'])
        assert.equal((await get(rawKey, path)).body.data.length, 1, path);
    });

    test('a deletion is refused, and nothing is loaded, when it names another account\'s record or an account, or "deleted" is not a boolean', async () => {
      const owner = randomUUID();
      const other = randomUUID();
      const theirs = incident(owner, 1, minute(1));
      await importFile(ctx.commandLineDb, ndjson([account(owner), account(other), theirs]));
      const cases: [object, RegExp][] = [
        [
          gone('incident', theirs.id, other),
          /^InputError: line 2: field "account_id": record ".*" already belongs to another account/,
        ],
        [
          { type: 'account', id: other, deleted: true },
          /^InputError: line 2: field "deleted" cannot be true: accounts are not deleted by an import/,
        ],
        [
          { ...gone('incident', theirs.id, owner), deleted: 'yes' },
          /^InputError: line 2: field "deleted" must be true or false \(got "yes"\)/,
        ],
        [
          { type: 'incident', account_id: owner, deleted: true },
          /^InputError: line 2: field "id" is required/,
        ],
      ];
      for (const [bad, message] of cases) {
        const fresh = incident(other, 2, minute(2));
        await assert.rejects(importFile(ctx.commandLineDb, ndjson([fresh, bad])), message);
        assert.equal((await accountRow(other)).incident_count, 0);
      }
      assert.equal((await accountRow(owner)).incident_count, 1);
    });

    test('a deletion may carry its own type and the other fields of its type, in either format; not another type, nor an unknown field', async () => {
      const accountId = randomUUID();
      const [first, second, third] = [1, 2, 3].map((n) => incident(accountId, n, minute(n)));
      await importFile(ctx.commandLineDb, ndjson([account(accountId), first!, second!, third!]));
      // A record copied from an export and marked deleted: its other fields, even stale or
      // malformed ones, are ignored.
      const copied = (record: ReturnType<typeof incident>) => ({
        ...record,
        incident_number: 'not checked',
        severity_score: 6,
        deleted: true,
      });
      const { type: _type, ...withoutType } = copied(first!);
      const summary = await importFile(
        ctx.commandLineDb,
        json({ incidents: [withoutType, copied(second!), { ...incident(accountId, 4, minute(4)) }] }),
      );
      assert.deepEqual(summary.deleted, { incident: 2 });
      assert.equal(summary.incident, 1);
      assert.deepEqual((await importFile(ctx.commandLineDb, ndjson([copied(third!)]))).deleted, {
        incident: 1,
      });
      assert.equal((await accountRow(accountId)).incident_count, 1);

      const survivor = incident(accountId, 5, minute(5));
      await importFile(ctx.commandLineDb, ndjson([survivor]));
      const cases: [string, RegExp][] = [
        [
          json({ incidents: [survivor, { ...copied(survivor), type: 'user' }] }),
          /^InputError: incidents\[1\]: field "type" must be "incident" for a record of "incidents" \(got "user"\)/,
        ],
        [
          json({ users: [{ ...gone('incident', survivor.id, accountId) }] }),
          /^InputError: users\[0\]: field "type" must be "user" for a record of "users" \(got "incident"\)/,
        ],
        [
          json({ incidents: [{ ...copied(survivor), colour: 'red' }] }),
          /^InputError: incidents\[0\]: field "colour" is not a field of incident/,
        ],
        [
          ndjson([survivor, { ...copied(survivor), colour: 'red' }]),
          /^InputError: line 2: field "colour" is not a field of incident/,
        ],
      ];
      for (const [file, message] of cases) {
        await assert.rejects(importFile(ctx.commandLineDb, file), message);
        assert.equal((await accountRow(accountId)).incident_count, 2);
      }
    });

    test('a record imported unchanged keeps its place in the feed; a changed one moves to the head', async () => {
      const accountId = randomUUID();
      const kept = incident(accountId, 1, minute(1));
      const changed = incident(accountId, 2, minute(2));
      await importFile(ctx.commandLineDb, ndjson([account(accountId), kept, changed]));
      const seqs = async () =>
        Object.fromEntries(
          (
            await ctx.db
              .selectFrom('incidents')
              .select(['id', 'change_seq'])
              .where('account_id', '=', accountId)
              .execute()
          ).map((r) => [r.id, r.change_seq]),
        );
      const first = await seqs();
      assert.equal((await accountRow(accountId)).data_version, Math.max(first[kept.id]!, first[changed.id]!));
      await importFile(ctx.commandLineDb, ndjson([kept, { ...changed, status: 'closed' }]));
      const second = await seqs();
      assert.equal(second[kept.id], first[kept.id]);
      assert.ok(second[changed.id]! > first[changed.id]!);
      assert.equal((await accountRow(accountId)).data_version, second[changed.id]);
    });

    test('tombstones past CHANGES_RETENTION_DAYS are purged by the next import, which records the last seq purged', async (t) => {
      const accountId = randomUUID();
      const records = [1, 2, 3].map((n) => incident(accountId, n, minute(n)));
      await importFile(ctx.commandLineDb, ndjson([account(accountId), ...records]));
      await importFile(ctx.commandLineDb, ndjson([gone('incident', records[0]!.id, accountId)]));
      const [tombstone] = await ctx.db
        .selectFrom('incident_tombstones')
        .select('change_seq')
        .where('account_id', '=', accountId)
        .execute();
      assert.ok(tombstone !== undefined);
      assert.equal((await accountRow(accountId)).changes_purged_seq, 0);
      // The clock moves 2.5 s at once and then stands still, so the import below cannot age its own
      // tombstone past the retention however long a busy machine makes it take.
      t.mock.timers.enable({ apis: ['Date'], now: Date.now() + 2500 });
      // A retention of 2 s: the tombstone above is older, the one this import leaves is not.
      await importFile(ctx.commandLineDb, ndjson([gone('incident', records[1]!.id, accountId)]), {
        retentionDays: 2 / 86_400,
      });
      const left = await ctx.db
        .selectFrom('incident_tombstones')
        .select('id')
        .where('account_id', '=', accountId)
        .execute();
      assert.deepEqual(
        left.map((t) => t.id),
        [records[1]!.id],
      );
      assert.equal((await accountRow(accountId)).changes_purged_seq, tombstone.change_seq);
    });

    test('random deletions and additions: every slice of the newest-first list stays right, by range reads over position blocks', async () => {
      const accountId = randomUUID();
      const next = random(store === 'sqlite' ? 7 : 11);
      let model: { id: string; created_at: string }[] = [];
      const load = async (records: ReturnType<typeof incident>[], deletions: string[] = []) => {
        await importFile(
          ctx.commandLineDb,
          ndjson([...records, ...deletions.map((id) => gone('incident', id, accountId))]),
        );
        model = [
          ...model.filter((r) => !deletions.includes(r.id)),
          ...records.map((r) => ({ id: r.id, created_at: r.created_at })),
        ];
        model.sort((a, b) =>
          a.created_at !== b.created_at ? (a.created_at < b.created_at ? -1 : 1) : a.id < b.id ? -1 : 1,
        );
      };
      const check = async (label: string) => {
        const {
          incident_count: total,
          data_version: version,
          created_at: incarnation,
        } = await accountRow(accountId);
        assert.equal(total, model.length, label);
        const newestFirst = [...model].reverse().map((r) => r.id);
        for (const limit of [1, 7, 50, 200]) {
          for (let offset = 0; offset <= total + 1; offset += limit === 1 ? 29 : 13) {
            const page = await ctx.runtime.services.incidents.listNewestFirst(
              accountId,
              { total, version, incarnation },
              offset,
              limit,
            );
            assert.deepEqual(
              page.map((i) => i.id),
              newestFirst.slice(offset, offset + limit),
              `${label}: offset ${offset}, limit ${limit}`,
            );
          }
        }
      };
      const pick = (count: number) => {
        const ids = new Set<string>();
        while (ids.size < count) ids.add((model[Math.floor(next() * model.length)] as { id: string }).id);
        return [...ids];
      };
      const holes = () =>
        ctx.db
          .selectFrom('incident_blocks')
          .select(['block', 'live'])
          .where('account_id', '=', accountId)
          .execute();

      await importFile(ctx.commandLineDb, ndjson([account(accountId)]));
      await load(Array.from({ length: 900 }, (_, i) => incident(accountId, i + 1, minute(i))));
      await check('in order');
      assert.deepEqual(await holes(), []);

      // Random ones, the whole third block, the newest and the oldest.
      const wholeBlock = model.slice(256, 384).map((r) => r.id);
      const edges = [...model.slice(-5), ...model.slice(0, 3)].map((r) => r.id);
      await load([], [...new Set([...pick(60), ...wholeBlock, ...edges])]);
      await check('after deletions');
      assert.ok((await holes()).some((h) => h.block === 2 && h.live === 0));

      await load(
        Array.from({ length: 200 }, (_, i) => incident(accountId, 1000 + i, minute(2000 + i))),
        pick(30),
      );
      await check('after additions and more deletions in one import');

      // An incident older than the others: the account is re-ranked and its holes are gone.
      await load([incident(accountId, 5000, minute(-1))], pick(5));
      await check('after an addition out of order');
      assert.deepEqual(await holes(), []);

      const { rawKey } = await seedKey(ctx.db, accountId);
      const last = await get(rawKey, `/incidents?limit=200&page=${Math.ceil(model.length / 200)}`);
      assert.deepEqual(
        last.body.data.data.map((i: { id: string }) => i.id),
        [...model]
          .reverse()
          .map((r) => r.id)
          .slice(Math.floor((model.length - 1) / 200) * 200),
      );
    });
  });
}
