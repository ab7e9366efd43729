import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import {
  bearer,
  createTestContext,
  STORES,
  seedAccount,
  seedIncidents,
  seedKey,
  type TestContext,
} from '../../helpers.ts';

/** Incidents with every optional field set and varied, so the lists show all their shapes. */
const publicFields = (i: number) => ({
  incident_number: `INC-2025-${String(i + 1).padStart(4, '0')}`,
  description: `Incident ${i + 1}`,
  status: i % 2 === 0 ? 'open' : 'closed',
  severity_likelihood: i % 5 === 0 ? null : (i % 5) + 1,
  severity_impact: (i % 4) + 1,
  location: 'Plant A',
  incident_date: '2025-01-01',
});

for (const store of STORES) {
  describe(`incidents (${store})`, () => {
    let ctx: TestContext;
    let rawKey: string;
    let rows: Awaited<ReturnType<typeof seedIncidents>>;
    let otherAccountIncident: string;

    before(async () => {
      ctx = await createTestContext(store);
      const accountId = await seedAccount(ctx.db);
      rows = await seedIncidents(ctx.db, accountId, 120, publicFields);
      ({ rawKey } = await seedKey(ctx.db, accountId));
      const other = await seedAccount(ctx.db);
      otherAccountIncident = (await seedIncidents(ctx.db, other, 1, publicFields))[0]!.id;
    });
    after(() => ctx.close());

    const get = (url: string) => ctx.app.inject({ method: 'GET', url, headers: bearer(rawKey) });

    test('first page: newest first, default limit 50, object-shaped data with pagination', async () => {
      const res = await get('/api/v1/public/incidents');
      assert.equal(res.statusCode, 200);
      const body = res.json();
      assert.equal(body.error, false);
      assert.equal(body.data.data.length, 50);
      assert.deepEqual(body.data.pagination, { page: 1, limit: 50, total: 120, pages: 3 });
      assert.equal(body.data.data[0].id, rows[119]!.id);
      assert.equal(body.data.data[49].id, rows[70]!.id);
    });

    test('last partial page and a page past the end', async () => {
      const last = (await get('/api/v1/public/incidents?page=3')).json();
      assert.equal(last.data.data.length, 20);
      assert.equal(last.data.data[19].id, rows[0]!.id);
      const past = (await get('/api/v1/public/incidents?page=4')).json();
      assert.deepEqual(past.data, { data: [], pagination: { page: 4, limit: 50, total: 120, pages: 3 } });
    });

    test('severity_score is likelihood × impact, null when a rating is missing', async () => {
      const body = (await get('/api/v1/public/incidents?limit=200')).json();
      for (const incident of body.data.data) {
        const expected =
          incident.severity_likelihood === null
            ? null
            : incident.severity_likelihood * incident.severity_impact;
        assert.equal(incident.severity_score, expected);
      }
      assert.ok(body.data.data.some((i: { severity_score: null }) => i.severity_score === null));
    });

    test("get one incident; another account's id and malformed ids are 404 with the contract body", async () => {
      const one = await get(`/api/v1/public/incidents/${rows[5]!.id}`);
      assert.equal(one.statusCode, 200);
      assert.equal(one.json().data.id, rows[5]!.id);
      for (const id of [otherAccountIncident, randomUUID(), 'not-a-uuid', "1' OR '1'='1", '%00']) {
        const res = await get(`/api/v1/public/incidents/${encodeURIComponent(id)}`);
        assert.equal(res.statusCode, 404, id);
        assert.deepEqual(res.json(), { error: true, message: 'Incident not found' });
      }
    });
  });
}
