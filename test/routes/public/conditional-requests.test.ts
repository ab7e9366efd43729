import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { importFile } from '../../../src/import/import.ts';
import { apiKeyService } from '../../../src/services/api-key-service.ts';
import { bearer, createTestContext, STORES, seedAccount, seedKey, type TestContext } from '../../helpers.ts';

/**
 * ETags, 304s and the response cache: a cached body must never answer another account, outlive
 * an import, or outlive a change to the key or plan.
 */

const PUBLIC_URLS = ['/api/v1/public/incidents', '/api/v1/public/users', '/api/v1/public/departments'];

function incident(accountId: string, minute: number, id = randomUUID()) {
  const at = new Date(Date.UTC(2025, 0, 1) + minute * 60_000).toISOString();
  return {
    type: 'incident',
    id,
    account_id: accountId,
    incident_number: `INC-2025-${String(minute + 1).padStart(4, '0')}`,
    description: `Incident at minute ${minute}`,
    status: 'open',
    severity_likelihood: 2,
    severity_impact: 3,
    location: 'Plant A',
    incident_date: '2025-01-01',
    created_at: at,
    updated_at: at,
  };
}

function user(accountId: string, name: string) {
  return {
    type: 'user',
    id: randomUUID(),
    account_id: accountId,
    name,
    email: `${name.toLowerCase()}-${randomUUID().slice(0, 8)}@example.com`,
    role: 'employee',
    created_at: '2025-01-01T00:00:00Z',
  };
}

for (const store of STORES) {
  describe(`conditional requests and the response cache (${store})`, () => {
    let ctx: TestContext;
    let dir: string;
    let files = 0;

    /** Imports `records` through the same code path as `safety-api import`. */
    const load = async (records: object[]) => {
      files += 1;
      const path = join(dir, `import-${files}.ndjson`);
      writeFileSync(path, `${records.map((r) => JSON.stringify(r)).join('\n')}\n`);
      await importFile(ctx.commandLineDb, path);
    };

    /** An account with `incidents` incidents, one user and one department, and a key. */
    const account = async (incidents: number) => {
      const accountId = await seedAccount(ctx.db);
      await load([
        ...Array.from({ length: incidents }, (_, i) => incident(accountId, i)),
        user(accountId, 'Avery'),
        {
          type: 'department',
          id: randomUUID(),
          account_id: accountId,
          name: 'Operations',
          created_at: '2025-01-01T00:00:00Z',
        },
      ]);
      const key = await seedKey(ctx.db, accountId);
      return { accountId, ...key };
    };

    const get = (rawKey: string, url: string, headers: Record<string, string> = {}) =>
      ctx.app.inject({ method: 'GET', url, headers: { ...bearer(rawKey), ...headers } });

    before(async () => {
      ctx = await createTestContext(store);
      dir = mkdtempSync(join(tmpdir(), 'safety-api-conditional-'));
    });
    after(async () => {
      await ctx.close();
      rmSync(dir, { recursive: true, force: true });
    });

    test('every 200 carries a strong ETag that follows the body', async () => {
      const { rawKey } = await account(3);
      const page = (await get(rawKey, '/api/v1/public/incidents')).json();
      for (const url of [...PUBLIC_URLS, `/api/v1/public/incidents/${page.data.data[0].id}`]) {
        const res = await get(rawKey, url);
        assert.equal(res.statusCode, 200);
        const etag = res.headers.etag as string;
        assert.match(etag, /^"[^"]+"$/, 'strong: quoted, no W/ prefix');
        assert.equal((await get(rawKey, url)).headers.etag, etag, 'same body, same tag');
      }
      const limited = await get(rawKey, '/api/v1/public/incidents?limit=2');
      assert.notEqual(limited.headers.etag, (await get(rawKey, '/api/v1/public/incidents')).headers.etag);
      // A cached entry answers the same normalized request only.
      assert.equal(limited.json().data.pagination.limit, 2);
      assert.equal(limited.json().data.data.length, 2);
    });

    test('If-None-Match with the current tag: 304, no body, ETag and rate-limit headers, not counted', async () => {
      const { rawKey } = await account(2);
      for (const url of PUBLIC_URLS) {
        const first = await get(rawKey, url);
        const etag = first.headers.etag as string;
        const remaining = Number(first.headers['x-ratelimit-remaining']);
        for (const condition of [etag, `"other", W/${etag}`]) {
          const notModified = await get(rawKey, url, { 'if-none-match': condition });
          assert.equal(notModified.statusCode, 304, condition);
          assert.equal(notModified.body, '');
          assert.equal(notModified.headers.etag, etag);
          assert.equal(Number(notModified.headers['x-ratelimit-remaining']), remaining, 'not counted');
          assert.ok(notModified.headers['x-ratelimit-limit']);
          assert.ok(notModified.headers['x-ratelimit-reset']);
        }
        const changed = await get(rawKey, url, { 'if-none-match': '"not-the-tag"' });
        assert.equal(changed.statusCode, 200);
        assert.equal(
          Number(changed.headers['x-ratelimit-remaining']),
          remaining - 1,
          'the 304s cost nothing',
        );
      }
    });

    test('If-None-Match: * is answered like any request: a 200 with the body, counted', async () => {
      const { rawKey } = await account(2);
      for (const url of PUBLIC_URLS) {
        const first = await get(rawKey, url);
        const remaining = Number(first.headers['x-ratelimit-remaining']);
        for (const condition of ['*', ' * ']) {
          const res = await get(rawKey, url, { 'if-none-match': condition });
          assert.equal(res.statusCode, 200, `${url} ${condition}`);
          assert.deepEqual(res.json(), first.json());
          assert.equal(res.headers.etag, first.headers.etag);
        }
        const after = await get(rawKey, url);
        assert.equal(Number(after.headers['x-ratelimit-remaining']), remaining - 3, 'each * was counted');
      }
      // Also on a body that had to be built for it (nothing cached yet for this page).
      const uncached = await get(rawKey, '/api/v1/public/incidents?limit=1&page=2', { 'if-none-match': '*' });
      assert.equal(uncached.statusCode, 200);
      assert.equal(uncached.json().data.data.length, 1);
    });

    test('a 304 still needs a valid key', async () => {
      const { rawKey, id } = await account(1);
      const etag = (await get(rawKey, '/api/v1/public/incidents')).headers.etag as string;
      const anonymous = await ctx.app.inject({
        method: 'GET',
        url: '/api/v1/public/incidents',
        headers: { 'if-none-match': etag },
      });
      assert.equal(anonymous.statusCode, 401);
      await apiKeyService.revoke(ctx.db, id, 'test');
      const revoked = await get(rawKey, '/api/v1/public/incidents', { 'if-none-match': etag });
      assert.equal(revoked.statusCode, 401);
      assert.equal(revoked.json().error, 'API_KEY_INVALID');
    });

    test("the cache never answers with another account's data", async () => {
      const a = await account(4);
      const b = await account(4);
      const fromA = await get(a.rawKey, '/api/v1/public/incidents?page=1&limit=2');
      const fromB = await get(b.rawKey, '/api/v1/public/incidents?page=1&limit=2');
      assert.notEqual(fromA.headers.etag, fromB.headers.etag);
      assert.notDeepEqual(fromA.json().data.data, fromB.json().data.data);
      const ownIds = await ctx.db
        .selectFrom('incidents')
        .select('id')
        .where('account_id', '=', b.accountId)
        .execute();
      const own = new Set(ownIds.map((r) => r.id));
      for (const item of fromB.json().data.data) assert.ok(own.has(item.id));
      // B presenting A's tag learns nothing: a full 200 with B's own body.
      const probe = await get(b.rawKey, '/api/v1/public/incidents?page=1&limit=2', {
        'if-none-match': fromA.headers.etag as string,
      });
      assert.equal(probe.statusCode, 200);
      assert.equal(probe.headers.etag, fromB.headers.etag);
      const users = await Promise.all([a, b].map((k) => get(k.rawKey, '/api/v1/public/users')));
      assert.notDeepEqual(users[0]!.json().data, users[1]!.json().data);
    });

    test('an import makes every cached body and ETag of the account stale at once', async () => {
      const { rawKey, accountId } = await account(3);
      const before = await get(rawKey, '/api/v1/public/incidents');
      assert.equal(before.json().data.pagination.total, 3);
      const newest = incident(accountId, 10_000);
      await load([newest]);
      const after = await get(rawKey, '/api/v1/public/incidents', {
        'if-none-match': before.headers.etag as string,
      });
      assert.equal(after.statusCode, 200);
      assert.notEqual(after.headers.etag, before.headers.etag);
      assert.equal(after.json().data.pagination.total, 4);
      assert.equal(after.json().data.data[0].id, newest.id);
      assert.equal((await get(rawKey, `/api/v1/public/incidents/${newest.id}`)).statusCode, 200);

      // An update of an existing incident changes its body too, with no change to the count.
      const changed = { ...newest, status: 'closed' };
      const single = await get(rawKey, `/api/v1/public/incidents/${newest.id}`);
      await load([changed]);
      const updated = await get(rawKey, `/api/v1/public/incidents/${newest.id}`);
      assert.equal(updated.json().data.status, 'closed');
      assert.notEqual(updated.headers.etag, single.headers.etag);

      // Users, departments and locations alone also make the lists stale.
      const users = await get(rawKey, '/api/v1/public/users');
      await load([user(accountId, 'Blake')]);
      const usersAfter = await get(rawKey, '/api/v1/public/users', {
        'if-none-match': users.headers.etag as string,
      });
      assert.equal(usersAfter.statusCode, 200);
      assert.deepEqual(
        usersAfter.json().data.map((u: { name: string }) => u.name),
        ['Avery', 'Blake'],
      );
    });

    test('disabling or revoking a key, or removing API access, applies to the very next request', async () => {
      const { rawKey, id, accountId } = await account(2);
      const url = '/api/v1/public/incidents';
      assert.equal((await get(rawKey, url)).statusCode, 200);
      await apiKeyService.disable(ctx.db, id, 'test');
      assert.equal((await get(rawKey, url)).statusCode, 401);
      await apiKeyService.enable(ctx.db, id, 'test');
      assert.equal((await get(rawKey, url)).statusCode, 200);

      await ctx.db.updateTable('accounts').set({ api_access: 0 }).where('id', '=', accountId).execute();
      const refused = await get(rawKey, url);
      assert.equal(refused.statusCode, 403);
      assert.equal(refused.json().error, 'FEATURE_NOT_AVAILABLE');
      await ctx.db.updateTable('accounts').set({ api_access: 1 }).where('id', '=', accountId).execute();
      assert.equal((await get(rawKey, url)).statusCode, 200);

      await apiKeyService.revoke(ctx.db, id, 'test');
      assert.equal((await get(rawKey, url)).statusCode, 401);
    });
  });
}
