import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import diagnostics_channel from 'node:diagnostics_channel';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { type KyselyPlugin, sql } from 'kysely';
import { importFile } from '../../src/import/import.ts';
import { account, dir, incident, json, minute, ndjson } from './files.ts';
import { bearer, createTestContext, STORES, seedKey, type TestContext } from '../helpers.ts';

for (const store of STORES) {
  describe(`import (${store})`, () => {
    let ctx: TestContext;
    const accountId = randomUUID();

    before(async () => {
      ctx = await createTestContext(store);
    });
    after(() => ctx.close());

    const count = async (table: 'accounts' | 'incidents' | 'users' | 'departments' | 'locations') =>
      Number(
        (
          await ctx.db
            .selectFrom(table)
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );

    /**
     * The account's positions are the dense ranks of (created_at, id), its count is right, and the
     * API's pages (newest first) list exactly that order.
     */
    const assertPagedInOrder = async (accountId: string) => {
      const rows = await ctx.db
        .selectFrom('incidents')
        .select(['id', 'created_at', 'position'])
        .where('account_id', '=', accountId)
        .execute();
      const ordered = [...rows].sort((a, b) =>
        a.created_at !== b.created_at ? (a.created_at < b.created_at ? -1 : 1) : a.id < b.id ? -1 : 1,
      );
      assert.deepEqual(
        ordered.map((r) => r.position),
        ordered.map((_, index) => index + 1),
      );
      const row = await ctx.db
        .selectFrom('accounts')
        .select('incident_count')
        .where('id', '=', accountId)
        .executeTakeFirstOrThrow();
      assert.equal(row.incident_count, rows.length);
      const { rawKey } = await seedKey(ctx.db, accountId);
      const served: string[] = [];
      for (let page = 1; served.length < rows.length; page += 1) {
        const body = (
          await ctx.app.inject({
            url: `/api/v1/public/incidents?limit=200&page=${page}`,
            headers: bearer(rawKey),
          })
        ).json().data;
        assert.equal(body.pagination.total, rows.length);
        assert.ok(body.data.length > 0, `page ${page} is empty`);
        served.push(...body.data.map((i: { id: string }) => i.id));
      }
      assert.deepEqual(served, ordered.map((r) => r.id).reverse());
    };

    test('NDJSON: every record type, then the API serves it with a correct total and order', async () => {
      const dept = randomUUID();
      const counts = await importFile(
        ctx.commandLineDb,
        ndjson([
          account(accountId),
          {
            type: 'department',
            id: dept,
            account_id: accountId,
            name: 'Ops',
            active: true,
            created_at: '2025-01-01T00:00:00Z',
          },
          {
            type: 'location',
            id: randomUUID(),
            account_id: accountId,
            name: 'Plant',
            created_at: '2025-01-01T00:00:00+02:00',
          },
          {
            type: 'user',
            id: randomUUID(),
            account_id: accountId,
            name: 'Ann',
            email: 'ann@example.com',
            role: 'super_admin',
            department: 'Ops',
            job_title: 'Lead',
          },
          incident(accountId, 1, '2025-01-01T00:00:00Z', { severity_score: 999 }),
          incident(accountId, 2, '2025-01-02T00:00:00Z', { severity_likelihood: null }),
          incident(accountId, 3, '2025-01-03T00:00:00Z'),
        ]),
      );
      assert.deepEqual(counts, { account: 1, department: 1, location: 1, user: 1, incident: 3, deleted: {} });

      const { rawKey } = await seedKey(ctx.db, accountId);
      const body = (
        await ctx.app.inject({ url: '/api/v1/public/incidents', headers: bearer(rawKey) })
      ).json();
      assert.equal(body.data.pagination.total, 3);
      assert.deepEqual(
        body.data.data.map((i: { incident_number: string }) => i.incident_number),
        ['INC-2025-0003', 'INC-2025-0002', 'INC-2025-0001'],
      );
      assert.equal(body.data.data[2].severity_score, 6, 'severity_score is computed, never imported');
      assert.equal(body.data.data[1].severity_score, null);
      const locations = (
        await ctx.app.inject({ url: '/api/v1/public/locations', headers: bearer(rawKey) })
      ).json();
      assert.equal(locations.data[0].created_at, '2024-12-31T22:00:00.000Z');
    });

    test('upsert by id; older incidents imported later take their place in the order', async () => {
      const { rawKey } = await seedKey(ctx.db, accountId);
      const page = async () =>
        (await ctx.app.inject({ url: '/api/v1/public/incidents?limit=200', headers: bearer(rawKey) })).json()
          .data;
      const first = (await page()).data[0];
      await importFile(
        ctx.commandLineDb,
        ndjson([
          { ...incident(accountId, 3, first.created_at), id: first.id, status: 'closed' },
          incident(accountId, 9, '2024-06-01T00:00:00Z'),
          incident(accountId, 10, '2026-06-01T00:00:00Z'),
        ]),
      );
      const after = await page();
      assert.equal(after.pagination.total, 5);
      assert.deepEqual(
        after.data.map((i: { incident_number: string }) => i.incident_number),
        ['INC-2025-0010', 'INC-2025-0003', 'INC-2025-0002', 'INC-2025-0001', 'INC-2025-0009'],
      );
      assert.equal(after.data[1].status, 'closed');
      const two = (
        await ctx.app.inject({ url: '/api/v1/public/incidents?limit=2&page=3', headers: bearer(rawKey) })
      ).json();
      assert.deepEqual(
        two.data.data.map((i: { incident_number: string }) => i.incident_number),
        ['INC-2025-0009'],
      );
    });

    test('JSON document with sections, in dependency order whatever the order in the file', async () => {
      const other = randomUUID();
      const counts = await importFile(
        ctx.commandLineDb,
        json({
          incidents: [{ ...incident(other, 1, '2025-02-01T00:00:00Z'), type: undefined }],
          accounts: [{ id: other, name: 'Other', api_access: false }],
        }),
      );
      assert.equal(counts.incident, 1);
      const row = await ctx.db
        .selectFrom('accounts')
        .selectAll()
        .where('id', '=', other)
        .executeTakeFirstOrThrow();
      assert.equal(row.api_access, 0);
      assert.equal(row.rate_limit_per_hour, 1000);
      assert.equal(row.incident_count, 1);
    });

    test('a long JSON section names its records by their index in the whole section', async () => {
      const target = randomUUID();
      const incidents = Array.from({ length: 4500 }, (_, i) => ({
        ...incident(target, i + 1, new Date(Date.UTC(2025, 0, 1) + i * 1000).toISOString()),
        type: undefined,
      }));
      const accounts = [{ id: target, name: 'Long' }];
      const bad = incidents.map((r, i) => (i === 4321 ? { ...r, status: '' } : r));
      await assert.rejects(
        importFile(ctx.commandLineDb, json({ accounts, incidents: bad })),
        /^InputError: incidents\[4321\]: field "status" must not be empty/,
      );
      assert.equal((await importFile(ctx.commandLineDb, json({ accounts, incidents }))).incident, 4500);
      await assertPagedInOrder(target);
    });

    test('a bad record names its place and field, and nothing at all is loaded', async () => {
      const before = { accounts: await count('accounts'), incidents: await count('incidents') };
      const fresh = randomUUID();
      const good = [account(fresh), incident(fresh, 1, '2025-01-01T00:00:00Z')];
      const cases: [string, RegExp][] = [
        [
          ndjson([...good, incident(fresh, 2, '2025-01-01T00:00:00Z', { incident_number: 'INC-25-1' })]),
          /^line 3: field "incident_number" must look like INC-<year>-<sequence>/,
        ],
        [
          ndjson([...good, incident(fresh, 2, '2025-01-01T00:00:00Z', { severity_impact: 'high' })]),
          /^line 3: field "severity_impact" must be a whole number/,
        ],
        [
          ndjson([...good, incident(fresh, 2, '2025-01-01T00:00:00Z', { severity_likelihood: 2.5 })]),
          /^line 3: field "severity_likelihood"/,
        ],
        [
          ndjson([...good, incident(fresh, 2, 'yesterday')]),
          /^line 3: field "created_at" must be an ISO 8601 date-time/,
        ],
        [
          ndjson([...good, incident(fresh, 2, '2025-01-01T00:00:00Z', { incident_date: '2025-02-30' })]),
          /^line 3: field "incident_date" must be a date/,
        ],
        [
          ndjson([...good, incident(fresh, 2, '2025-01-01T00:00:00Z', { incident_date: '2025-13-01' })]),
          /^line 3: field "incident_date" must be a date/,
        ],
        [
          ndjson([...good, incident(fresh, 2, '2025-01-01T25:00:00.000Z')]),
          /^line 3: field "created_at" must be an ISO 8601 date-time/,
        ],
        [
          ndjson([...good, incident(fresh, 2, '2025-01-01T00:00:00Z', { id: 'nope' })]),
          /^line 3: field "id" must be a UUID/,
        ],
        [
          ndjson([...good, incident(fresh, 2, '2025-01-01T00:00:00Z', { status: undefined })]),
          /^line 3: field "status" is required/,
        ],
        [
          ndjson([...good, incident(fresh, 2, '2025-01-01T00:00:00Z', { colour: 'red' })]),
          /^line 3: field "colour" is not a field of incident/,
        ],
        [
          ndjson([...good, incident(randomUUID(), 2, '2025-01-01T00:00:00Z')]),
          /^line 3: field "account_id" names no account/,
        ],
        [ndjson([...good, { type: 'widget', id: randomUUID() }]), /^line 3: field "type" must be one of/],
        [
          ndjson([
            ...good,
            {
              type: 'user',
              id: randomUUID(),
              account_id: fresh,
              name: 'X',
              email: 'x@example.com',
              role: 'overlord',
            },
          ]),
          /^line 3: field "role" must be one of super_admin, admin, manager, employee/,
        ],
        [
          ndjson([
            ...good,
            {
              type: 'user',
              id: randomUUID(),
              account_id: fresh,
              name: 'X',
              email: 'not-an-email',
              role: 'employee',
            },
          ]),
          /^line 3: field "email" must be an email address/,
        ],
        [
          ndjson([
            ...good,
            {
              type: 'user',
              id: randomUUID(),
              account_id: fresh,
              name: 'X',
              email: 'ann@example.com',
              role: 'employee',
            },
          ]),
          /^line 3: field "email" "ann@example.com" is already used/,
        ],
        [
          ndjson([...good, { type: 'account', id: randomUUID(), name: 'Y', api_access: 'yes' }]),
          /^line 3: field "api_access" must be true or false/,
        ],
        [
          ndjson([...good, incident(fresh, 2, '2025-01-01T00:00:00Z', { description: 'a\u0000b' })]),
          /^line 3: field "description" must not contain the NUL character/,
        ],
        [
          ndjson([
            ...good,
            incident(fresh, 2, '2025-01-01T00:00:00Z', { location: 'half \ud83d of a pair' }),
          ]),
          /^line 3: field "location" must be valid Unicode: it holds a lone surrogate/,
        ],
        [
          ndjson([...good, incident(fresh, 2, '2025-01-01T00:00:00Z', { status: '\udc00' })]),
          /^line 3: field "status" must be valid Unicode/,
        ],
      ];
      for (const [path, expected] of cases) {
        await assert.rejects(importFile(ctx.commandLineDb, path), (error: Error) => {
          assert.match(error.message, expected);
          return true;
        });
      }
      const broken = join(dir, 'broken.ndjson');
      writeFileSync(broken, `${JSON.stringify(account(fresh))}\n{"type": "incident",\n`);
      await assert.rejects(importFile(ctx.commandLineDb, broken), /^InputError: line 2: not valid JSON/);
      // A line longer than any record (here 3 MiB with no line break) is refused by its number
      // before the reader holds it whole.
      const endless = join(dir, 'endless.ndjson');
      writeFileSync(
        endless,
        `${JSON.stringify(account(fresh))}\n{"type": "incident", "description": "${'x'.repeat(3 << 20)}`,
      );
      await assert.rejects(
        importFile(ctx.commandLineDb, endless),
        /^InputError: line 2: longer than 1,000,000 characters/,
      );
      await assert.rejects(
        importFile(
          ctx.commandLineDb,
          json({ accounts: [{ ...account(fresh), type: undefined }], incidents: [{ id: 1 }] }),
        ),
        /^InputError: incidents\[0\]: field "id" must be a UUID/,
      );
      await assert.rejects(
        importFile(ctx.commandLineDb, json({ accounts: {} })),
        /"accounts" must be an array/,
      );
      await assert.rejects(importFile(ctx.commandLineDb, json({ things: [] })), /"things" is not a section/);
      await assert.rejects(importFile(ctx.commandLineDb, join(dir, 'missing.ndjson')), /no such file/);
      await assert.rejects(
        importFile(ctx.commandLineDb, join(dir, 'data.csv')),
        /must end in \.json or \.ndjson/,
      );

      assert.deepEqual({ accounts: await count('accounts'), incidents: await count('incidents') }, before);
    });

    test('a record cannot move to another account', async () => {
      const [existing] = await ctx.db.selectFrom('incidents').select(['id', 'account_id']).limit(1).execute();
      const other = randomUUID();
      await assert.rejects(
        importFile(
          ctx.commandLineDb,
          ndjson([account(other), { ...incident(other, 1, '2025-01-01T00:00:00Z'), id: existing!.id }]),
        ),
        /^InputError: line 2: field "account_id": record ".*" already belongs to another account/,
      );
      const still = await ctx.db
        .selectFrom('incidents')
        .select('account_id')
        .where('id', '=', existing!.id)
        .executeTakeFirstOrThrow();
      assert.equal(still.account_id, existing!.account_id);
    });

    test('imports in descending and shuffled order page correctly, also into an account with incidents', async () => {
      const target = randomUUID();
      const start = Date.UTC(2024, 0, 1);
      const at = (slot: number) => new Date(start + slot * 60_000).toISOString();
      const descending: object[] = [account(target)];
      for (let i = 2999; i >= 0; i -= 1) descending.push(incident(target, i + 1, at(i * 2)));
      await importFile(ctx.commandLineDb, ndjson(descending));
      await assertPagedInOrder(target);

      // Odd slots fall between the existing ones, a few before and after all of them.
      const shuffled: object[] = [];
      for (let i = 0; i < 1500; i += 1) {
        const slot = ((i * 7919) % 1500) * 4 - 1 + (i % 3 === 0 ? 6000 : 0);
        shuffled.push(incident(target, 5000 + i, at(slot)));
      }
      await importFile(ctx.commandLineDb, ndjson(shuffled));
      await assertPagedInOrder(target);
    });

    test('ties on created_at are ordered by id', async () => {
      const target = randomUUID();
      const records: object[] = [account(target)];
      for (let i = 0; i < 1200; i += 1) {
        records.push(incident(target, i + 1, `2025-03-0${1 + (i % 3)}T00:00:00.000Z`));
      }
      await importFile(ctx.commandLineDb, ndjson(records));
      await assertPagedInOrder(target);
      // More of the same instants, arriving after: they interleave with the earlier ones by id.
      await importFile(
        ctx.commandLineDb,
        ndjson(Array.from({ length: 300 }, (_, i) => incident(target, 2000 + i, '2025-03-02T00:00:00.000Z'))),
      );
      await assertPagedInOrder(target);
    });

    test('an update that changes created_at re-ranks the account', async () => {
      const target = randomUUID();
      const records: object[] = [account(target)];
      for (let i = 0; i < 50; i += 1)
        records.push(incident(target, i + 1, `2025-04-01T00:${String(i).padStart(2, '0')}:00Z`));
      await importFile(ctx.commandLineDb, ndjson(records));
      const oldest = records[1] as { id: string };
      const newest = records[50] as { id: string };
      await importFile(
        ctx.commandLineDb,
        ndjson([
          { ...oldest, created_at: '2025-05-01T00:00:00Z' },
          { ...newest, created_at: '2025-03-01T00:00:00Z' },
          incident(target, 99, '2025-04-01T00:30:30Z'),
        ]),
      );
      await assertPagedInOrder(target);
      const positions = await ctx.db
        .selectFrom('incidents')
        .select(['id', 'position'])
        .where('id', 'in', [oldest.id, newest.id])
        .execute();
      assert.deepEqual(
        new Map(positions.map((r) => [r.id, r.position])),
        new Map([
          [oldest.id, 51],
          [newest.id, 1],
        ]),
      );
    });

    /**
     * An incident stored in an account of its own (`taken`), the incidents stored then (`before`),
     * and the records of a new account with `incidents` incidents, for a test to put `taken`'s id in.
     */
    async function takenAndANewAccount(incidents: number) {
      const owner = randomUUID();
      const taken = incident(owner, 1, '2025-01-01T00:00:00Z');
      await importFile(ctx.commandLineDb, ndjson([account(owner), taken]));
      const before = await count('incidents');
      const other = randomUUID();
      const records: object[] = [account(other)];
      for (let i = 0; i < incidents; i += 1) {
        records.push(incident(other, i + 1, new Date(Date.UTC(2025, 0, 1) + i * 1000).toISOString()));
      }
      return { taken, before, records };
    }

    test('a record moved to another account deep in a large batch is named by its line', async () => {
      const { taken, before, records } = await takenAndANewAccount(4500);
      // Line 2,702: after at least one full batch was written, neither first nor last in its own.
      records[2701] = { ...(records[2701] as object), id: taken.id };
      await assert.rejects(
        importFile(ctx.commandLineDb, ndjson(records)),
        new RegExp(
          `^InputError: line 2702: field "account_id": record "${taken.id}" already belongs to another account`,
        ),
      );
      assert.equal(await count('incidents'), before);
      const still = await ctx.db
        .selectFrom('incidents')
        .select('account_id')
        .where('id', '=', taken.id)
        .executeTakeFirstOrThrow();
      assert.equal(still.account_id, taken.account_id);
    });

    test('a record refused in an earlier batch is reported, not a bad line the reader met further on', async () => {
      const { taken, before, records } = await takenAndANewAccount(3500);
      // Line 1,502, in the first batch; line 3,001, in the second, is one the reading thread (which
      // reads ahead of the writes) refuses.
      records[1501] = { ...(records[1501] as object), id: taken.id };
      records[3000] = { ...(records[3000] as object), severity_impact: -1 };
      await assert.rejects(
        importFile(ctx.commandLineDb, ndjson(records)),
        new RegExp(
          `^InputError: line 1502: field "account_id": record "${taken.id}" already belongs to another account`,
        ),
      );
      assert.equal(await count('incidents'), before);
    });

    test('a multi-batch import stores every field and gives every record its feed seq in file order', async () => {
      const target = randomUUID();
      const sent: (ReturnType<typeof incident> & Record<string, unknown>)[] = [];
      for (let i = 0; i < 4500; i += 1) {
        // Every other record leaves its optional fields out, so the batch writes carry NULLs too.
        const extra =
          i % 2 === 0
            ? {
                // Every character COPY's text format escapes, and text that looks like its NULL.
                description: `Ünïcode "quoted" \\ line\nbreak\ttab\rCR \\N ${i}`,
                location: 'Dock',
                incident_date: '2025-01-01',
              }
            : { severity_likelihood: null, severity_impact: null };
        sent.push(incident(target, i + 1, new Date(Date.UTC(2025, 0, 1) + i * 1000).toISOString(), extra));
      }
      await importFile(ctx.commandLineDb, ndjson([account(target), ...sent]));
      const stored = await ctx.db
        .selectFrom('incidents')
        .selectAll()
        .where('account_id', '=', target)
        .orderBy('change_seq')
        .execute();
      assert.deepEqual(
        stored.map((row) => [row.id, row.change_seq, row.created_seq, row.position]),
        sent.map((record, index) => [record.id, index + 1, index + 1, index + 1]),
      );
      for (const [index, row] of stored.entries()) {
        const record = sent[index];
        assert.ok(record !== undefined);
        assert.equal(row.description, record.description ?? null);
        assert.equal(row.location, record.location ?? null);
        assert.equal(row.incident_date, record.incident_date ?? null);
        assert.equal(row.severity_likelihood, record.severity_likelihood);
        assert.equal(row.severity_impact, record.severity_impact);
      }
      const version = async () =>
        (
          await ctx.db
            .selectFrom('accounts')
            .select('data_version')
            .where('id', '=', target)
            .executeTakeFirstOrThrow()
        ).data_version;
      assert.equal(await version(), 4500);

      // Again, with two records changed: every record takes a seq, but only those two move to it.
      const again = sent.map((record, index) =>
        index === 10 || index === 4000 ? { ...record, status: 'closed' } : record,
      );
      await importFile(ctx.commandLineDb, ndjson([account(target), ...again]));
      const moved = await ctx.db
        .selectFrom('incidents')
        .select(['id', 'change_seq', 'created_seq'])
        .where('account_id', '=', target)
        .where('change_seq', '>', 4500)
        .orderBy('change_seq')
        .execute();
      assert.deepEqual(moved, [
        { id: sent[10]?.id, change_seq: 4511, created_seq: 11 },
        { id: sent[4000]?.id, change_seq: 8501, created_seq: 4001 },
      ]);
      assert.equal(await version(), 9000);
    });

    test('new incidents, then stored ones and one met twice, over several batches: loaded as one upsert', async () => {
      const target = randomUUID();
      const stored = Array.from({ length: 2500 }, (_, i) => incident(target, i + 1, minute(i)));
      await importFile(ctx.commandLineDb, ndjson([account(target), ...stored]));

      const fresh = Array.from({ length: 3000 }, (_, i) => incident(target, 5000 + i, minute(10_000 + i)));
      const updates = stored.slice(0, 10).map((record) => ({ ...record, status: 'closed' }));
      const again = { ...fresh[5], description: 'met again' };
      const last = incident(target, 9999, minute(20_000));
      const counts = await importFile(
        ctx.commandLineDb,
        ndjson([account(target), ...fresh, ...updates, again, last]),
      );
      assert.deepEqual(counts, {
        account: 1,
        department: 0,
        location: 0,
        user: 0,
        incident: 3012,
        deleted: {},
      });
      const rows = await ctx.db
        .selectFrom('incidents')
        .select(['id', 'status', 'description', 'change_seq'])
        .where('account_id', '=', target)
        .execute();
      assert.equal(rows.length, 5501);
      const byId = new Map(rows.map((row) => [row.id, row]));
      // Each record takes the feed seq of its line: the file's first incident is seq 2501.
      for (const [index, record] of updates.entries()) {
        assert.deepEqual(byId.get(record.id), {
          id: record.id,
          status: 'closed',
          description: null,
          change_seq: 2500 + 3000 + index + 1,
        });
      }
      assert.deepEqual(byId.get(again.id as string), {
        id: again.id,
        status: 'open',
        description: 'met again',
        change_seq: 2500 + 3011,
      });
      assert.equal(byId.get(fresh[6]?.id as string)?.change_seq, 2500 + 7);
      assert.equal(byId.get(last.id)?.change_seq, 2500 + 3012);
      assert.equal(rows.filter((row) => row.status === 'closed').length, 10);
      await assertPagedInOrder(target);
    });

    test('multi-byte characters survive reads of any size, and a line longer than a read counts once', async () => {
      const target = randomUUID();
      // Odd-length multi-byte text, so that reads (src/import/source.ts) end inside characters somewhere.
      const description = `Verschüttete Säure – 危险 😀 ${'é'.repeat(997)}`;
      const records: object[] = [account(target)];
      for (let i = 0; i < 1500; i += 1) {
        records.push(
          incident(target, i + 1, new Date(Date.UTC(2025, 0, 1) + i * 1000).toISOString(), { description }),
        );
      }
      const path = ndjson(records);
      assert.deepEqual(await importFile(ctx.commandLineDb, path), {
        account: 1,
        department: 0,
        location: 0,
        user: 0,
        incident: 1500,
        deleted: {},
      });
      const stored = await ctx.db
        .selectFrom('incidents')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('account_id', '=', target)
        .where('description', '=', description)
        .executeTakeFirstOrThrow();
      assert.equal(Number(stored.n), 1500);

      // Longer than two reads, shorter than any line is allowed to be: refused for its field, on its line.
      const long = incident(target, 1, '2025-01-01T00:00:00Z', { description: 'x'.repeat(300_000) });
      await assert.rejects(
        importFile(ctx.commandLineDb, ndjson([account(target), long, incident(target, 2, 'soon')])),
        /^InputError: line 2: field "description" must be at most 100000 characters/,
      );
    });

    test('CRLF and lone CR line breaks are counted as lines, as readline counts them', async () => {
      const target = randomUUID();
      const path = join(dir, `${randomUUID()}.ndjson`);
      const lines = [account(target), incident(target, 1, '2025-01-01T00:00:00Z')].map((r) =>
        JSON.stringify(r),
      );
      writeFileSync(path, `${lines.join('\r\n')}\r\r\n{"type": "incident", "id": 1}\r\n`);
      await assert.rejects(
        importFile(ctx.commandLineDb, path),
        /^InputError: line 4: field "id" must be a UUID/,
      );
      writeFileSync(path, `${lines.join('\r')}\r`);
      assert.deepEqual(await importFile(ctx.commandLineDb, path), {
        account: 1,
        department: 0,
        location: 0,
        user: 0,
        incident: 1,
        deleted: {},
      });
    });

    test('the first problem in file order is reported, whether the reading or the writing finds it', async () => {
      const target = randomUUID();
      const before = await count('incidents');
      // About 13 MiB: many reads, so the reader runs ahead of the writes as far as it may.
      const records: object[] = [account(target)];
      for (let i = 0; i < 30_000; i += 1) {
        records.push(
          incident(target, i + 1, new Date(Date.UTC(2025, 0, 1) + i * 1000).toISOString(), {
            description: 'd'.repeat(400),
          }),
        );
      }
      const write = (lines: string[]) => {
        const path = join(dir, `${randomUUID()}.ndjson`);
        writeFileSync(path, lines.join('\n'));
        return path;
      };
      const lines = records.map((r) => JSON.stringify(r));
      const unknownAccount = JSON.stringify(incident(randomUUID(), 1, '2025-01-01T00:00:00Z'));

      // The database side finds line 20,000's problem before the reader reaches line 30,000's.
      const both = [...lines];
      both[19_999] = unknownAccount;
      both[29_999] = '{"type": "incident",';
      await assert.rejects(
        importFile(ctx.commandLineDb, write(both)),
        /^InputError: line 20000: field "account_id" names no account/,
      );
      // The reader's problem comes first in the file: it wins, however late the writes would fail.
      const readerFirst = [...lines];
      readerFirst[1_000] = '{"type": "incident",';
      readerFirst[20_000] = unknownAccount;
      await assert.rejects(
        importFile(ctx.commandLineDb, write(readerFirst)),
        /^InputError: line 1001: not valid JSON/,
      );
      // The very last line, after every read and most batches.
      const last = [...lines];
      last[30_000] = JSON.stringify({ ...records[30_000], severity_impact: 'high' });
      await assert.rejects(
        importFile(ctx.commandLineDb, write(last)),
        /^InputError: line 30001: field "severity_impact" must be a whole number/,
      );
      assert.equal(await count('incidents'), before);
      assert.deepEqual((await importFile(ctx.commandLineDb, write(lines))).incident, 30_000);
      assert.equal(await count('incidents'), before + 30_000);
    });

    test('records the reader posts while the writer still waits for the store are all written', async () => {
      // Under load, the reading thread can post its first records before the writing thread's first
      // statement has answered (a worker's message that finds no listener is lost: the import then
      // waited forever). Here every statement after the reader starts waits until it has posted.
      let posted: Promise<unknown> | null = null;
      const readerStarted = (message: unknown) => {
        if (typeof message === 'object' && message !== null && 'worker' in message) {
          const { worker } = message;
          if (worker instanceof Worker) posted ??= once(worker, 'message');
        }
      };
      const afterReaderPosts: KyselyPlugin = {
        transformQuery: ({ node }) => node,
        transformResult: async ({ result }) => {
          await posted;
          return result;
        },
      };
      const id = randomUUID();
      const file = ndjson([account(id), incident(id, 1, minute(1)), incident(id, 2, minute(2))]);
      diagnostics_channel.subscribe('worker_threads', readerStarted);
      // A generous deadline: the import takes a few milliseconds, or never ends.
      const stuck = new AbortController();
      try {
        const counts = await Promise.race([
          importFile(ctx.commandLineDb.withPlugin(afterReaderPosts), file),
          sleep(60_000, null, { signal: stuck.signal }).then(() => {
            throw new Error('no import after 60 s: the records posted first were lost');
          }),
        ]);
        assert.equal(counts.incident, 2);
      } finally {
        stuck.abort();
        diagnostics_channel.unsubscribe('worker_threads', readerStarted);
      }
      assert.notEqual(posted, null, 'the reader was not seen starting');
      await assertPagedInOrder(id);
    });

    test('an import leaves the connection as it found it', { skip: store !== 'sqlite' }, async () => {
      const pragmas = async () => {
        const read = async (name: string) =>
          Object.values((await sql.raw(`PRAGMA ${name}`).execute(ctx.db)).rows[0] as object)[0];
        return {
          foreign_keys: await read('foreign_keys'),
          temp_store: await read('temp_store'),
          cache_size: await read('cache_size'),
        };
      };
      const own = await pragmas();
      assert.equal(own.foreign_keys, 1);
      const target = randomUUID();
      await importFile(
        ctx.commandLineDb,
        ndjson([account(target), incident(target, 1, '2025-01-01T00:00:00Z')]),
      );
      assert.deepEqual(await pragmas(), own);
      await assert.rejects(
        importFile(ctx.commandLineDb, ndjson([incident(randomUUID(), 1, '2025-01-01T00:00:00Z')])),
      );
      assert.deepEqual(await pragmas(), own);
      // Foreign keys are enforced again: an incident of no account is refused by the store itself.
      await assert.rejects(
        sql`INSERT INTO incidents (id, account_id, incident_number, status, created_at, updated_at)
            VALUES (${randomUUID()}, ${randomUUID()}, 'INC-2025-1', 'open', 'x', 'x')`.execute(ctx.db),
        /FOREIGN KEY constraint failed/,
      );
    });

    test('a large NDJSON import streams in batches and pages correctly at depth', async () => {
      const big = randomUUID();
      const records: object[] = [account(big)];
      const start = Date.UTC(2024, 0, 1);
      // Shuffled creation times: the order is derived, not taken from the file.
      for (let i = 0; i < 2500; i += 1) {
        const slot = (i * 7919) % 2500;
        records.push(incident(big, slot + 1, new Date(start + slot * 1000).toISOString()));
      }
      await importFile(ctx.commandLineDb, ndjson(records));
      const { rawKey } = await seedKey(ctx.db, big);
      const page = (
        await ctx.app.inject({ url: '/api/v1/public/incidents?limit=200&page=13', headers: bearer(rawKey) })
      ).json().data;
      assert.deepEqual(page.pagination, { page: 13, limit: 200, total: 2500, pages: 13 });
      assert.equal(page.data.length, 100);
      assert.equal(page.data[0].incident_number, 'INC-2025-0100');
      assert.equal(page.data[99].incident_number, 'INC-2025-0001');
      if (store === 'postgres') {
        // The planner has statistics of the bulk-loaded table at once, not when autovacuum comes.
        const { rows } = await sql<{ analyzed: boolean }>`
          select last_analyze is not null as analyzed from pg_stat_user_tables where relname = 'incidents'`.execute(
          ctx.db,
        );
        assert.deepEqual(rows, [{ analyzed: true }]);
      }
    });
  });
}
