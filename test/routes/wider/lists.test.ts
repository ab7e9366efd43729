import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import * as oidc from 'openid-client';
import { STORES, seedAccount, seedIncidents } from '../../helpers.ts';
import { discover, type OauthServer, seedClient, seedUser, startOauthServer } from '../../oauth/harness.ts';

const INCIDENTS = 45;

for (const store of STORES) {
  describe(`wider API lists (${store})`, () => {
    let server: OauthServer;
    let token: string;
    let otherToken: string;
    let incidentIds: string[];

    before(async () => {
      server = await startOauthServer(store);
      const { db } = server.ctx;
      const accountId = await seedAccount(db);
      await seedUser(db, accountId, { name: 'Zed' });
      await seedUser(db, accountId, { name: 'ann' });
      await seedUser(db, accountId, { name: 'Gone', active: 0 });
      const rows = await seedIncidents(db, accountId, INCIDENTS);
      incidentIds = rows.map((r) => r.id).reverse();

      const client = await seedClient(db, accountId);
      const config = await discover(server, client.clientId, client.clientSecret);
      token = (await oidc.clientCredentialsGrant(config, { scope: 'users:read incidents:read' }))
        .access_token;

      const other = await seedAccount(db);
      await seedUser(db, other, { name: 'Outsider' });
      const otherClient = await seedClient(db, other);
      const otherConfig = await discover(server, otherClient.clientId, otherClient.clientSecret);
      otherToken = (await oidc.clientCredentialsGrant(otherConfig, { scope: 'users:read' })).access_token;
    });
    after(() => server.close());

    const get = (path: string, bearerToken = token) =>
      fetch(`${server.baseUrl}/api/v1/${path}`, { headers: { authorization: `Bearer ${bearerToken}` } });

    test('paging incidents to the end: newest first, start + limit is the next page', async () => {
      const seen: string[] = [];
      let start = 0;
      for (;;) {
        const res = await get(`incidents?_start=${start}&_limit=20`);
        assert.equal(res.status, 200);
        const body = await res.json();
        assert.deepEqual(body.pagination, {
          totalRecords: INCIDENTS,
          perPage: 20,
          totalPages: 3,
          start,
          currentPage: start / 20 + 1,
        });
        seen.push(...body.response.map((i: { id: string }) => i.id));
        if (body.pagination.currentPage >= body.pagination.totalPages) break;
        start += 20;
      }
      assert.deepEqual(seen, incidentIds);
      const past = await (await get('incidents?_start=100')).json();
      assert.deepEqual(past.response, []);
      assert.equal(past.pagination.currentPage, 6);
      // However many digits: a whole number is an offset, past the end an empty page.
      for (const [start, expected] of [
        ['9007199254740990', 9007199254740990],
        ['9'.repeat(40), Number.MAX_SAFE_INTEGER],
      ] as const) {
        const far = await get(`incidents?_start=${start}&_limit=${'9'.repeat(30)}`);
        assert.equal(far.status, 200, start);
        const body = await far.json();
        assert.deepEqual(body.response, []);
        assert.equal(body.pagination.start, expected);
        assert.equal(body.pagination.perPage, 100);
      }
    });

    test('defaults _start=0 and _limit=20; _limit above 100 is reduced to 100; an offset not on a page boundary', async () => {
      const first = await (await get('incidents')).json();
      assert.equal(first.response.length, 20);
      assert.equal(first.pagination.perPage, 20);
      assert.equal(first.response[0].severity_score, 6);
      const capped = await (await get('incidents?_limit=500')).json();
      assert.equal(capped.pagination.perPage, 100);
      assert.equal(capped.response.length, INCIDENTS);
      const offset = await (await get('incidents?_start=5&_limit=10')).json();
      assert.deepEqual(
        offset.response.map((i: { id: string }) => i.id),
        incidentIds.slice(5, 15),
      );
      assert.equal(offset.pagination.currentPage, 1);
    });

    test("users: active ones of the token's account only, by name", async () => {
      const body = await (await get('users?_limit=1')).json();
      assert.equal(body.response[0].name, 'ann');
      assert.deepEqual(body.pagination, {
        totalRecords: 2,
        perPage: 1,
        totalPages: 2,
        start: 0,
        currentPage: 1,
      });
      const second = await (await get('users?_start=1&_limit=1')).json();
      assert.equal(second.response[0].name, 'Zed');
      const other = await (await get('users', otherToken)).json();
      assert.deepEqual(
        other.response.map((u: { name: string }) => u.name),
        ['Outsider'],
      );
    });

    test('bad _start or _limit values are a 400 with a message naming the parameter', async () => {
      for (const [query, name] of [
        ['_start=-1', '_start'],
        ['_start=abc', '_start'],
        ['_start=1.5', '_start'],
        ['_limit=0', '_limit'],
        ['_limit=-5', '_limit'],
        ['_limit=ten', '_limit'],
      ] as const) {
        const res = await get(`incidents?${query}`);
        assert.equal(res.status, 400, query);
        const body = await res.json();
        assert.equal(body.error, true);
        assert.match(body.message, new RegExp(`^${name} must be`), query);
      }
    });

    test('a token without the scope of a list gets 403', async () => {
      for (const path of ['departments', 'locations']) {
        const res = await get(path);
        assert.equal(res.status, 403, path);
        assert.match((await res.json()).message, new RegExp(`${path}:read`));
      }
      assert.equal((await get('incidents', otherToken)).status, 403);
    });
  });
}
