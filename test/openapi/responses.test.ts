import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import * as oidc from 'openid-client';
import { bearer, STORES, seedAccount, seedIncidents, seedKey } from '../helpers.ts';
import { discover, type OauthServer, seedClient, seedUser, startOauthServer } from '../oauth/harness.ts';
import { DocumentCheck } from './document-check.ts';

/**
 * Real responses of every documented operation, each checked against /openapi.json: the success
 * with data, the 304, every refusal the credential checks give, the 404, the 405 of every write
 * method on every path, and the 429.
 */

const WRITE_METHODS = ['POST', 'PUT', 'PATCH', 'DELETE'] as const;
const T = '2026-01-01T00:00:00.000Z';

for (const store of STORES) {
  describe(`responses match the OpenAPI document (${store})`, () => {
    let server: OauthServer;
    let check: DocumentCheck;
    let accountId: string;
    let readKey: string;
    let writeKey: string;
    let token: string;
    let narrowToken: string;
    let incidentId: string;

    before(async () => {
      server = await startOauthServer(store);
      const { db, app } = server.ctx;
      accountId = await seedAccount(db);
      readKey = (await seedKey(db, accountId)).rawKey;
      writeKey = (await seedKey(db, accountId, { scope: 'read-write' })).rawKey;
      await seedUser(db, accountId, { name: 'Amara Okafor', department: 'Operations' });
      await seedUser(db, accountId, { name: 'Ben Ode', department: null });
      for (const table of ['departments', 'locations'] as const) {
        await db
          .insertInto(table)
          .values({
            id: randomUUID(),
            account_id: accountId,
            name: 'Warehouse North',
            active: 1,
            created_at: T,
          })
          .execute();
      }
      // Null and filled optional fields both, and each status seen in data.
      const statuses = ['open', 'under_investigation', 'action_required', 'resolved', 'closed'];
      const rows = await seedIncidents(db, accountId, 5, (i) => ({
        status: statuses[i],
        description: i % 2 === 0 ? null : 'Slip on wet floor near the loading bay',
        location: i % 2 === 0 ? null : 'Warehouse North',
        incident_date: i % 2 === 0 ? null : '2025-01-01',
        severity_likelihood: i === 0 ? null : 2,
      }));
      incidentId = rows[0]!.id;

      const client = await seedClient(db, accountId);
      const config = await discover(server, client.clientId, client.clientSecret);
      const grant = (scope: string) => oidc.clientCredentialsGrant(config, { scope });
      token = (await grant('users:read departments:read locations:read incidents:read')).access_token;
      narrowToken = (await grant('users:read')).access_token;
      check = await DocumentCheck.of(app);
    });
    after(() => server.close());

    const send = async (method: string, url: string, headers: Record<string, string> = {}) => {
      const res = await server.ctx.app.inject({ method, url, headers });
      check.check(method, url, res);
      return res;
    };

    test('public API: 200 with data and 304 for every read, 404 for an unknown incident', async () => {
      for (const url of [
        '/api/v1/public/incidents',
        '/api/v1/public/incidents?page=2&limit=2',
        `/api/v1/public/incidents/${incidentId}`,
        '/api/v1/public/users',
        '/api/v1/public/departments',
        '/api/v1/public/locations',
      ]) {
        const ok = await send('GET', url, bearer(readKey));
        assert.equal(ok.statusCode, 200, url);
        assert.notDeepEqual(ok.json().data, [], url);
        const etag = String(ok.headers.etag);
        assert.equal((await send('GET', url, { ...bearer(readKey), 'if-none-match': etag })).statusCode, 304);
      }
      for (const id of [randomUUID(), 'not-a-uuid']) {
        const missing = await send('GET', `/api/v1/public/incidents/${id}`, bearer(readKey));
        assert.equal(missing.statusCode, 404);
      }
    });

    test('public API: 401 for a missing or unknown key, 403 for a plan without API access', async () => {
      assert.equal((await send('GET', '/api/v1/public/users')).statusCode, 401);
      const unknown = `svc_${'0'.repeat(40)}`;
      assert.equal((await send('GET', '/api/v1/public/incidents', bearer(unknown))).statusCode, 401);
      const { db } = server.ctx;
      const planlessAccount = await seedAccount(db);
      const planless = await seedKey(db, planlessAccount);
      // Keys are made while the plan allows them; the plan changing later is what this 403 is for.
      await db.updateTable('accounts').set({ api_access: 0 }).where('id', '=', planlessAccount).execute();
      assert.equal((await send('GET', '/api/v1/public/locations', bearer(planless.rawKey))).statusCode, 403);
    });

    test('public API: every write method on every path is 403 for a read key, 405 for a read-write key', async () => {
      for (const path of [
        'incidents',
        `incidents/${incidentId}`,
        'users',
        'departments',
        'locations',
        'changes',
      ]) {
        for (const method of WRITE_METHODS) {
          const url = `/api/v1/public/${path}`;
          assert.equal((await send(method, url, bearer(readKey))).statusCode, 403);
          const refused = await send(method, url, bearer(writeKey));
          assert.equal(refused.statusCode, 405);
          assert.equal(refused.headers.allow, 'GET, HEAD');
        }
      }
    });

    test('public API: 429 once the allowance is used up', async () => {
      const key = await seedKey(server.ctx.db, await seedAccount(server.ctx.db, { rate_limit_per_hour: 1 }));
      assert.equal((await send('GET', '/api/v1/public/departments', bearer(key.rawKey))).statusCode, 200);
      assert.equal((await send('GET', '/api/v1/public/incidents', bearer(key.rawKey))).statusCode, 429);
    });

    test('wider API: 200 with data, 400, 401, 403 and 405 on every list', async () => {
      for (const resource of ['users', 'departments', 'locations', 'incidents']) {
        const url = `/api/v1/${resource}`;
        const ok = await send('GET', `${url}?_start=0&_limit=2`, bearer(token));
        assert.equal(ok.statusCode, 200);
        assert.notDeepEqual(ok.json().response, []);
        assert.equal((await send('GET', `${url}?_limit=0`, bearer(token))).statusCode, 400);
        assert.equal((await send('GET', url)).statusCode, 401);
        assert.equal((await send('GET', url, bearer(readKey))).statusCode, 401);
        if (resource !== 'users') assert.equal((await send('GET', url, bearer(narrowToken))).statusCode, 403);
        for (const method of WRITE_METHODS) {
          assert.equal((await send(method, url, bearer(token))).statusCode, 405);
          assert.equal((await send(method, url)).statusCode, 401);
        }
      }
    });

    test('wider API: 429 once the OAuth client has used up the allowance', async () => {
      const { db } = server.ctx;
      const limited = await seedAccount(db, { rate_limit_per_hour: 1 });
      const client = await seedClient(db, limited);
      const config = await discover(server, client.clientId, client.clientSecret);
      const own = (await oidc.clientCredentialsGrant(config, { scope: 'users:read' })).access_token;
      assert.equal((await send('GET', '/api/v1/users', bearer(own))).statusCode, 200);
      assert.equal((await send('GET', '/api/v1/users', bearer(own))).statusCode, 429);
    });

    test('changes feed: 200 with changes and at the head, 400 for a garbled cursor, 410 for an expired one', async () => {
      const url = '/api/v1/public/changes';
      const first = await send('GET', `${url}?limit=3`, bearer(readKey));
      assert.equal(first.statusCode, 200);
      assert.notDeepEqual(first.json().data.data, []);
      assert.equal((await send('GET', `${url}?cursor=latest`, bearer(readKey))).statusCode, 200);
      assert.equal((await send('GET', `${url}?cursor=garbled`, bearer(readKey))).statusCode, 400);
      const { db } = server.ctx;
      const purged = await seedAccount(db);
      const key = await seedKey(db, purged);
      await seedIncidents(db, purged, 2);
      const early = (await send('GET', `${url}?limit=1`, bearer(key.rawKey))).json().data.next_cursor;
      await db.updateTable('accounts').set({ changes_purged_seq: 2 }).where('id', '=', purged).execute();
      assert.equal((await send('GET', `${url}?cursor=${early}`, bearer(key.rawKey))).statusCode, 410);
    });

    test('every documented operation was answered and checked', () => {
      const answered = new Set([...check.seen].map((seen) => seen.split(' ')[0]));
      assert.deepEqual(
        check.operationIds().filter((id) => !answered.has(id)),
        [],
      );
    });
  });
}
