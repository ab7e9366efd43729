import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { REDACTED, redactUrl, requestId } from '../src/logging.ts';
import {
  bearer,
  captureLog,
  createTestContext,
  STORES,
  seedAccount,
  seedKey,
  type TestContext,
} from './helpers.ts';

/** DESIGN "Secrets in logs": no key, token or password reaches the log, however it is sent. */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const fakeKey = () => `svc_${randomBytes(20).toString('hex')}`;
const withId = (id: string | undefined) =>
  requestId({ headers: id === undefined ? {} : { 'x-request-id': id } } as never);

describe('redactUrl', () => {
  test('secret query values are replaced, whatever the name case or encoding; others stay', () => {
    const secrets = [
      'api_key',
      'key',
      'access_token',
      'token',
      'refresh_token',
      'code',
      'client_secret',
      'password',
      'login_hint',
    ];
    for (const name of secrets) {
      for (const spelled of [name, name.toUpperCase(), encodeURIComponent(name).replace('_', '%5F')]) {
        const url = `/api/v1/public/incidents?page=2&${spelled}=s3cr3t-value&limit=10`;
        assert.equal(
          redactUrl(url),
          `/api/v1/public/incidents?page=2&${spelled}=${REDACTED}&limit=10`,
          spelled,
        );
      }
    }
    assert.equal(redactUrl('/x?keyboard=1&monkey=2'), '/x?keyboard=1&monkey=2');
    assert.equal(redactUrl('/x?token=a&token=b'), `/x?token=${REDACTED}&token=${REDACTED}`);
    assert.equal(redactUrl('/api/v1/public/users'), '/api/v1/public/users');
  });

  test('a key anywhere in the URL is replaced, also percent-encoded or in upper case', () => {
    const key = fakeKey();
    assert.equal(redactUrl(`/api/v1/public/incidents/${key}`), `/api/v1/public/incidents/${REDACTED}`);
    assert.equal(redactUrl(`/a/${key.toUpperCase()}/b`), `/a/${REDACTED}/b`);
    const encoded = `svc%5f${key.slice(4, 10)}%${key.charCodeAt(10).toString(16)}${key.slice(11)}`;
    assert.equal(redactUrl(`/a/${encoded}`), `/a/${REDACTED}`);
    assert.equal(redactUrl(`/x?filter=${key}`), `/x?filter=${REDACTED}`);
  });
});

describe('request ids', () => {
  test('plain ids are kept: UUIDs, hex trace ids, short readable ids', () => {
    for (const id of [
      'trace-123.abc',
      '3f2504e0-4f89-11d3-9a0c-0305e82c3301',
      '3F2504E0-4F89-11D3-9A0C-0305E82C3301',
      '4bf92f3577b34da6a3ce929d0e0e4736',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      'req_Ab3kJ9xQ2mZ7pL',
      'checkout-service:2026-01-01T10:00:00.123Z',
    ]) {
      assert.equal(withId(id), id, id);
    }
  });

  test('secret-shaped or hostile ids are replaced by a UUID', () => {
    const jwt =
      'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U';
    for (const id of [
      fakeKey(),
      `x-${fakeKey().toUpperCase()}`,
      jwt,
      'eyJhbGciOiJub25lIn0',
      randomBytes(32)
        .toString('base64url')
        .replace(/^[^A-Z]*/, 'Q1a'),
      'Ks3g8xSvB2qLm9TzR4wYp7Nc',
      'a b\n{"level":60}',
      'x'.repeat(129),
      '',
    ]) {
      assert.match(withId(id), UUID, id);
    }
    assert.match(withId(undefined), UUID);
  });
});

for (const store of STORES) {
  describe(`the request log holds no secret (${store})`, () => {
    let ctx: TestContext;
    const log = captureLog();
    let rawKey: string;

    before(async () => {
      ctx = await createTestContext(store, { LOG_LEVEL: 'info' }, { logStream: log.stream });
      rawKey = (await seedKey(ctx.db, await seedAccount(ctx.db))).rawKey;
    });
    after(() => ctx.close());

    test('keys and tokens in the query, the path, headers or the request id never reach the log', async () => {
      const secrets = [rawKey, fakeKey(), 'OpaqueAccessToken0123456789abcdefXYZ', 'hunter2-Passw0rd'];
      const [key, otherKey, token, password] = secrets as [string, string, string, string];
      const requests: { url: string; headers?: Record<string, string>; logged: string }[] = [
        { url: `/api/v1/public/incidents?api_key=${key}&page=2`, logged: `?api_key=${REDACTED}&page=2` },
        { url: `/api/v1/public/users?key=${otherKey}`, logged: `/api/v1/public/users?key=${REDACTED}` },
        { url: `/api/v1/users?access_token=${token}`, logged: `/api/v1/users?access_token=${REDACTED}` },
        { url: `/api/v1/users?token=${token}&_limit=5`, logged: `?token=${REDACTED}&_limit=5` },
        { url: `/integration/v1/oauth2/authorize?code=${token}`, logged: `?code=${REDACTED}` },
        { url: `/x?refresh_token=${token}&client_secret=${token}`, logged: `?refresh_token=${REDACTED}&` },
        {
          url: `/admin/sign-in?password=${password}&login_hint=${password}`,
          logged: `?password=${REDACTED}&`,
        },
        { url: `/api/v1/public/incidents/${otherKey}`, logged: `/api/v1/public/incidents/${REDACTED}` },
        { url: `/api/v1/public/${key}/users`, logged: `/api/v1/public/${REDACTED}/users` },
        {
          url: '/api/v1/public/departments',
          headers: { ...bearer(key), 'x-request-id': key, cookie: `session=${token}` },
          logged: '/api/v1/public/departments',
        },
        {
          url: '/api/v1/users',
          headers: { authorization: `Bearer ${token}`, 'x-request-id': token },
          logged: '/api/v1/users',
        },
      ];
      for (const { url, headers } of requests) {
        const res = await ctx.app.inject({ method: 'GET', url, headers });
        assert.ok(res.statusCode < 500, url);
        for (const secret of secrets) {
          assert.ok(!String(res.headers['x-request-id']).includes(secret), `request id of ${url}`);
        }
      }

      const text = log.text();
      for (const secret of secrets) assert.ok(!text.includes(secret), `${secret} is in the log`);
      const urls = log.lines.flatMap((line) => {
        const req = line.req as { url?: string } | undefined;
        return req?.url === undefined ? [] : [req.url];
      });
      // The request line is still there to read, with only the secrets taken out.
      for (const { logged } of requests) {
        assert.ok(
          urls.some((url) => url.includes(logged)),
          `${logged} in ${JSON.stringify(urls)}`,
        );
      }
      const ids = log.lines.map((line) => String(line.reqId));
      assert.ok(ids.every((id) => !secrets.includes(id)));
      assert.ok(!text.includes('authorization') && !text.includes('cookie'), 'no header is logged');
    });
  });
}
