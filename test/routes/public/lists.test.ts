import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { bearer, createTestContext, STORES, seedAccount, seedKey, type TestContext } from '../../helpers.ts';

const T = '2025-03-01T10:00:00.000Z';

for (const store of STORES) {
  describe(`users, departments, locations (${store})`, () => {
    let ctx: TestContext;
    let rawKey: string;
    let accountId: string;

    before(async () => {
      ctx = await createTestContext(store);
      accountId = await seedAccount(ctx.db);
      const otherAccount = await seedAccount(ctx.db);
      ({ rawKey } = await seedKey(ctx.db, accountId));

      const user = (
        name: string,
        extra: Partial<{ active: number; vendor_support: number; account_id: string; id: string }> = {},
      ) => ({
        id: extra.id ?? randomUUID(),
        account_id: extra.account_id ?? accountId,
        name,
        email: `${name.replace(/\W/g, '').toLowerCase()}-${randomUUID().slice(0, 6)}@example.com`,
        role: 'manager',
        department: name === 'bob' ? null : 'Operations',
        job_title: name === 'bob' ? null : 'Supervisor',
        active: extra.active ?? 1,
        vendor_support: extra.vendor_support ?? 0,
        created_at: T,
      });
      await ctx.db
        .insertInto('users')
        .values([
          user('Charlie'),
          user('bob', { id: 'ffffffff-0000-4000-8000-000000000000' }),
          user('Bob', { id: '00000000-0000-4000-8000-000000000000' }),
          user('alice'),
          user('Inactive Ivan', { active: 0 }),
          user('Vendor Vera', { vendor_support: 1 }),
          user('Other Otto', { account_id: otherAccount }),
        ])
        .execute();
      for (const table of ['departments', 'locations'] as const) {
        await ctx.db
          .insertInto(table)
          .values([
            { id: randomUUID(), account_id: accountId, name: 'zeta', active: 1, created_at: T },
            { id: randomUUID(), account_id: accountId, name: 'Alpha', active: 1, created_at: T },
            { id: randomUUID(), account_id: accountId, name: 'beta', active: 1, created_at: T },
            { id: randomUUID(), account_id: accountId, name: 'Closed', active: 0, created_at: T },
            { id: randomUUID(), account_id: otherAccount, name: 'Foreign', active: 1, created_at: T },
          ])
          .execute();
      }
    });
    after(() => ctx.close());

    const get = (url: string) => ctx.app.inject({ method: 'GET', url, headers: bearer(rawKey) });

    test('users: active, not vendor support, this account only, by name case-insensitively then id', async () => {
      const res = await get('/api/v1/public/users');
      assert.equal(res.statusCode, 200);
      const body = res.json();
      assert.equal(body.error, false);
      assert.deepEqual(
        body.data.map((u: { name: string }) => u.name),
        ['alice', 'Bob', 'bob', 'Charlie'],
      );
      assert.deepEqual(Object.keys(body.data[0]).sort(), [
        'created_at',
        'department',
        'email',
        'id',
        'job_title',
        'name',
        'role',
      ]);
      const bob = body.data.find((u: { id: string }) => u.id === 'ffffffff-0000-4000-8000-000000000000');
      assert.equal(bob.department, null);
      assert.equal(bob.job_title, null);
      assert.equal(bob.created_at, T);
    });

    for (const table of ['departments', 'locations']) {
      test(`${table}: active, this account only, by name case-insensitively, exact fields`, async () => {
        const res = await get(`/api/v1/public/${table}`);
        assert.equal(res.statusCode, 200);
        const body = res.json();
        assert.equal(body.error, false);
        assert.deepEqual(
          body.data.map((d: { name: string }) => d.name),
          ['Alpha', 'beta', 'zeta'],
        );
        assert.deepEqual(Object.keys(body.data[0]).sort(), ['created_at', 'id', 'name']);
        assert.ok(res.headers['x-ratelimit-limit']);
      });
    }

    test('absurd query values on the incident list never fail: defaults apply, limit is capped at 200', async () => {
      const cases: [string, number, number][] = [
        ['', 1, 50],
        ['?page=0&limit=0', 1, 50],
        ['?page=-3&limit=-1', 1, 50],
        ['?page=abc&limit=xyz', 1, 50],
        ['?page=1.5&limit=2.5', 1, 50],
        ['?page=2&limit=10', 2, 10],
        ['?limit=201', 1, 200],
        ['?limit=999999999999', 1, 200],
        ['?page=1&page=2', 1, 50],
        ['?page=%00&limit=%27', 1, 50],
        ['?page=99999999999999999999', Number.MAX_SAFE_INTEGER, 50],
        // Any count of digits is a whole number: a longer one is not a fallback to page 1.
        [`?page=${'9'.repeat(400)}&limit=${'9'.repeat(30)}`, Number.MAX_SAFE_INTEGER, 200],
        ['?page=0002&limit=007', 2, 7],
      ];
      for (const [query, page, limit] of cases) {
        const res = await get(`/api/v1/public/incidents${query}`);
        assert.equal(res.statusCode, 200, query);
        const pagination = res.json().data.pagination;
        assert.equal(pagination.page, page, query);
        assert.equal(pagination.limit, limit, query);
        assert.equal(pagination.total, 0);
        assert.equal(pagination.pages, 0);
      }
    });
  });
}
