import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { importFile } from '../../src/import/import.ts';
import { bearer, createTestContext, STORES, seedKey, type TestContext } from '../helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'safety-import-'));

function ndjson(records: object[]): string {
  const path = join(dir, `${randomUUID()}.ndjson`);
  writeFileSync(path, records.map((r) => JSON.stringify(r)).join('\n'));
  return path;
}

function json(document: object): string {
  const path = join(dir, `${randomUUID()}.json`);
  writeFileSync(path, JSON.stringify(document));
  return path;
}

const account = (id: string, extra: object = {}) => ({
  type: 'account',
  id,
  name: 'Acme',
  api_access: true,
  rate_limit_per_hour: 500,
  ...extra,
});
const incident = (accountId: string, n: number, createdAt: string, extra: object = {}) => ({
  type: 'incident',
  id: randomUUID(),
  account_id: accountId,
  incident_number: `INC-2025-${String(n).padStart(4, '0')}`,
  status: 'open',
  severity_likelihood: 2,
  severity_impact: 3,
  created_at: createdAt,
  ...extra,
});

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

    test('NDJSON: every record type, then the API serves it with a correct total and order', async () => {
      const dept = randomUUID();
      const counts = await importFile(
        ctx.db,
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
      assert.deepEqual(counts, { account: 1, department: 1, location: 1, user: 1, incident: 3 });

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
        ctx.db,
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
        ctx.db,
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
      ];
      for (const [path, expected] of cases) {
        await assert.rejects(importFile(ctx.db, path), (error: Error) => {
          assert.match(error.message, expected);
          return true;
        });
      }
      const broken = join(dir, 'broken.ndjson');
      writeFileSync(broken, `${JSON.stringify(account(fresh))}\n{"type": "incident",\n`);
      await assert.rejects(importFile(ctx.db, broken), /^InputError: line 2: not valid JSON/);
      await assert.rejects(
        importFile(
          ctx.db,
          json({ accounts: [{ ...account(fresh), type: undefined }], incidents: [{ id: 1 }] }),
        ),
        /^InputError: incidents\[0\]: field "id" must be a UUID/,
      );
      await assert.rejects(importFile(ctx.db, json({ accounts: {} })), /"accounts" must be an array/);
      await assert.rejects(importFile(ctx.db, json({ things: [] })), /"things" is not a section/);
      await assert.rejects(importFile(ctx.db, join(dir, 'missing.ndjson')), /no such file/);
      await assert.rejects(importFile(ctx.db, join(dir, 'data.csv')), /must end in \.json or \.ndjson/);

      assert.deepEqual({ accounts: await count('accounts'), incidents: await count('incidents') }, before);
    });

    test('a record cannot move to another account', async () => {
      const [existing] = await ctx.db.selectFrom('incidents').select(['id', 'account_id']).limit(1).execute();
      const other = randomUUID();
      await assert.rejects(
        importFile(
          ctx.db,
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

    test('a large NDJSON import streams in batches and pages correctly at depth', async () => {
      const big = randomUUID();
      const records: object[] = [account(big)];
      const start = Date.UTC(2024, 0, 1);
      // Shuffled creation times: the order is derived, not taken from the file.
      for (let i = 0; i < 2500; i += 1) {
        const slot = (i * 7919) % 2500;
        records.push(incident(big, slot + 1, new Date(start + slot * 1000).toISOString()));
      }
      await importFile(ctx.db, ndjson(records));
      const { rawKey } = await seedKey(ctx.db, big);
      const page = (
        await ctx.app.inject({ url: '/api/v1/public/incidents?limit=200&page=13', headers: bearer(rawKey) })
      ).json().data;
      assert.deepEqual(page.pagination, { page: 13, limit: 200, total: 2500, pages: 13 });
      assert.equal(page.data.length, 100);
      assert.equal(page.data[0].incident_number, 'INC-2025-0100');
      assert.equal(page.data[99].incident_number, 'INC-2025-0001');
    });
  });
}
