import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { once } from 'node:events';
import { after, before, describe, test } from 'node:test';
import { ApiError, BODY_LIMIT_BYTES } from '../src/errors.ts';
import { OAUTH_PATH, SIGN_IN_PATH } from '../src/paths.ts';
import { captureLog, createTestContext, STORES, seedAccount, seedKey, type TestContext } from './helpers.ts';
import { seedClient } from './oauth/harness.ts';

/**
 * Malformed requests of every kind, sent over a real socket (app.inject would normalize some of
 * them), to the public and the wider API, with and without credentials. Whatever arrives: no 5xx,
 * never a framework error body, the contract's body for the status, credentials checked before
 * anything about the path, and no key or token in the log.
 */

type Credential = 'none' | 'read key' | 'write key' | 'token';
type Surface = 'public' | 'wider' | 'admin';

interface Case {
  surface: Surface;
  method: string;
  target: string;
  credential: Credential;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

interface RawResponse {
  status: number;
  headers: Map<string, string>;
  body: string;
  raw: string;
  /** Errors the client's socket saw (`ECONNRESET`, `EPIPE`): none when the server closes cleanly. */
  errors: string[];
}

const HEX = (n: number) =>
  randomBytes(Math.ceil(n / 2))
    .toString('hex')
    .slice(0, n);

/**
 * One request on its own connection, its parts written in turn as a client that does not wait for
 * an answer writes them (with backpressure, also after the server has answered or half-closed),
 * then the whole answer until the server closes.
 */
function exchange(port: number, ...parts: Buffer[]): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    const chunks: Buffer[] = [];
    const errors: string[] = [];
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', (error: Error & { code?: string }) => errors.push(error.code ?? error.message));
    // The server closes after its answer; this side closes once it has written everything and the
    // server's side is closed.
    let written = false;
    let serverEnded = false;
    const endWhenDone = () => {
      if (written && serverEnded) socket.end();
    };
    socket.on('end', () => {
      serverEnded = true;
      endWhenDone();
    });
    socket.on('close', () => {
      const raw = Buffer.concat(chunks).toString('latin1');
      const headEnd = raw.indexOf('\r\n\r\n');
      if (headEnd === -1) {
        reject(new Error(`no HTTP answer (${errors.join(', ')}): ${JSON.stringify(raw.slice(0, 200))}`));
        return;
      }
      const [statusLine, ...lines] = raw.slice(0, headEnd).split('\r\n');
      const headers = new Map<string, string>();
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
      }
      let body = raw.slice(headEnd + 4);
      if (headers.get('transfer-encoding') === 'chunked') body = unchunk(body);
      resolve({ status: Number(statusLine?.split(' ')[1]), headers, body, raw, errors });
    });
    void (async () => {
      for (const part of parts) {
        if (socket.destroyed) return;
        if (!socket.write(part)) await once(socket, 'drain');
      }
      written = true;
      endWhenDone();
    })().catch(() => {});
  });
}

function unchunk(body: string): string {
  let out = '';
  let rest = body;
  for (;;) {
    const lineEnd = rest.indexOf('\r\n');
    const size = Number.parseInt(rest.slice(0, lineEnd), 16);
    if (!(size > 0)) return out;
    out += rest.slice(lineEnd + 2, lineEnd + 2 + size);
    rest = rest.slice(lineEnd + 2 + size + 2);
  }
}

function requestBytes(c: Case, authorization: string | undefined): Buffer {
  const headers: Record<string, string> = { host: '127.0.0.1', connection: 'close', ...c.headers };
  if (authorization !== undefined && headers.authorization === undefined)
    headers.authorization = authorization;
  const body = c.body === undefined ? undefined : Buffer.from(c.body);
  if (body !== undefined && headers['transfer-encoding'] === undefined) {
    headers['content-length'] = String(body.length);
  }
  const head = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  return Buffer.concat([
    Buffer.from(`${c.method} ${c.target} HTTP/1.1\r\n${head}\r\n`, 'latin1'),
    body ?? Buffer.alloc(0),
  ]);
}

// Path segments and ids a client could send where an incident id goes.
const MALFORMED_IDS = [
  '%ff',
  '%ff%fe',
  '%zz',
  '%',
  '%2',
  '%c0%af',
  '%e0%80%80',
  '%ed%a0%80',
  '%00',
  '%2f',
  '%252f',
  '%2F..%2F..%2Fadmin',
  '..',
  '%2e%2e',
  '.',
  'a'.repeat(101),
  'a'.repeat(150),
  'f'.repeat(2000),
  `svc_${HEX(40)}`,
  '00000000-0000-0000-0000-000000000000',
  `${HEX(8)}-${HEX(4)}-4${HEX(3)}-8${HEX(3)}-${HEX(12)}`.toUpperCase(),
  `${HEX(8)}-${HEX(4)}-4${HEX(3)}-8${HEX(3)}-${HEX(12)}x`,
  '%20',
  'x;y=1',
  '%3Cscript%3Ealert(1)%3C%2Fscript%3E',
  "'%20OR%201=1--",
  '%C3%A9',
  '__proto__',
  'constructor',
  '-1',
  '1e9',
];

const PUBLIC_PATHS = [
  '/api/v1/public',
  '/api/v1/public/',
  '/api/v1/public//incidents',
  '/api/v1/public/incidents/',
  '/api/v1/public/incidents//',
  '/api/v1/public/incidents/x/y',
  '/api/v1/public/users/',
  '/api/v1/public/users//',
  '/api/v1/public/widgets',
  '/api/v1/public/INCIDENTS',
  '/api/v1/public/../public/users',
  '/api/v1/public/%2e%2e/admin',
  '/api/v1/public/%ff/users',
  '/api/v1/public/users%00',
  '/api/v1/public/users;x=1',
  '/api/v1/public/users#fragment',
  '/api/v1/public/locations%2F..',
  '/api/v1/public/departments/%ff',
];

const INCIDENT_QUERIES = [
  'page=%zz',
  'page=%ff',
  'page=-1',
  'page=0',
  'page=abc',
  'page=1e3',
  'page=99999999999999999999999',
  'page=1&page=2',
  'limit=201',
  'limit=0',
  'limit=-5',
  'limit=1.5',
  'limit[]=1',
  'page[x]=1',
  '%ff=1',
  '&&&',
  '=',
  'page',
  `limit=${'9'.repeat(5000)}`,
  '__proto__[x]=1',
  'constructor[prototype][x]=1',
  'page=%00',
  'page=1%',
  'limit=%',
];

const WIDER_TARGETS = [
  '/api/v1/users?_start=%zz',
  '/api/v1/users?_start=-1',
  '/api/v1/users?_limit=0',
  '/api/v1/users?_limit=abc',
  '/api/v1/users?_start=1&_start=2',
  '/api/v1/users?_limit=1e2',
  '/api/v1/users?_limit=101',
  '/api/v1/users?_start=99999999999999999999',
  '/api/v1/users?_limit=%ff',
  '/api/v1/users?_start[]=1',
  '/api/v1/users?%ff',
  '/api/v1/incidents?_start=0&_limit=1',
  '/api/v1/departments?_limit=%',
  '/api/v1/%ff',
  '/api/v1/users/%ff',
  '/api/v1/users/',
  '/api/v1//users',
  '/api/v1/nothing',
  `/api/v1/incidents/${'a'.repeat(300)}`,
  '/api/v1',
  '/api/v1/',
  '/api/v1/users/..',
  '/api/v1/USERS',
  '/api/v1/locations;x',
];

const ODD_METHODS = [
  'HEAD',
  'POST',
  'PUT',
  'PATCH',
  'DELETE',
  'OPTIONS',
  'TRACE',
  'PROPFIND',
  'MKCOL',
  'LOCK',
  'SEARCH',
  'PURGE',
];

const BODIES: { headers: Record<string, string>; body: string | Buffer }[] = [
  { headers: { 'content-type': 'application/json' }, body: '{not json' },
  { headers: { 'content-type': 'application/json' }, body: '{"__proto__":{"x":1}}' },
  { headers: { 'content-type': 'text/xml' }, body: '<a/>' },
  { headers: { 'content-type': 'application/json; charset=utf-99' }, body: '{}' },
  { headers: { 'content-type': '' }, body: 'x' },
  { headers: { 'content-type': 'application/octet-stream' }, body: Buffer.alloc(1024 * 1024 + 512, 1) },
  {
    headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
    body: '2\r\n{}\r\n0\r\n\r\n',
  },
];

/** `secrets`: the real credentials, also sent where they do not belong (query, path, request id). */
function cases(secrets: Record<Exclude<Credential, 'none'>, string>): Case[] {
  const all: Case[] = [];
  for (const credential of ['none', 'read key', 'token'] as const) {
    for (const target of [
      `/api/v1/public/incidents?api_key=${secrets['read key']}`,
      `/api/v1/public/incidents/${secrets['write key']}`,
      `/api/v1/public/users?access_token=${secrets.token}&key=${secrets['read key']}`,
    ]) {
      all.push({ surface: 'public', method: 'GET', target, credential });
    }
    all.push({
      surface: 'wider',
      method: 'GET',
      target: `/api/v1/users?access_token=${secrets.token}&_limit=5`,
      credential,
      headers: { 'x-request-id': secrets.token },
    });
  }
  const publicTargets = [
    ...MALFORMED_IDS.map((id) => `/api/v1/public/incidents/${id}`),
    ...PUBLIC_PATHS,
    ...INCIDENT_QUERIES.map((q) => `/api/v1/public/incidents?${q}`),
  ];
  for (const target of publicTargets) {
    for (const credential of ['none', 'read key', 'token'] as const) {
      all.push({ surface: 'public', method: 'GET', target, credential });
    }
  }
  for (const target of WIDER_TARGETS) {
    for (const credential of ['none', 'token', 'read key'] as const) {
      all.push({ surface: 'wider', method: 'GET', target, credential });
    }
  }
  const methodTargets: [Surface, string][] = [
    ['public', '/api/v1/public/incidents'],
    ['public', '/api/v1/public/incidents/%ff'],
    ['public', '/api/v1/public/nothing'],
    ['wider', '/api/v1/users'],
    ['wider', '/api/v1/nothing'],
  ];
  for (const [surface, target] of methodTargets) {
    for (const method of ODD_METHODS) {
      const credentials: Credential[] =
        surface === 'public' ? ['none', 'read key', 'write key'] : ['none', 'token'];
      for (const credential of credentials) all.push({ surface, method, target, credential });
    }
  }
  for (const { headers, body } of BODIES) {
    for (const method of ['POST', 'PUT']) {
      for (const credential of ['none', 'read key', 'write key'] as const) {
        all.push({
          surface: 'public',
          method,
          target: '/api/v1/public/incidents',
          credential,
          headers,
          body,
        });
      }
      for (const credential of ['none', 'token'] as const) {
        all.push({ surface: 'wider', method, target: '/api/v1/users', credential, headers, body });
      }
    }
  }
  // Headers: a malformed or misplaced credential is no credential at all.
  const key = `svc_${HEX(40)}`;
  for (const authorization of [
    '',
    'Bearer',
    'Bearer ',
    `bearer ${key}`,
    `Bearer  ${key}`,
    `Bearer ${key} `,
    `Bearer ${key.toUpperCase()}`,
    `Bearer ${key.slice(0, -1)}`,
    `Bearer ${key}0`,
    `Basic ${Buffer.from('a:b').toString('base64')}`,
    `Bearer ${'A'.repeat(8000)}`,
    'Bearer eyJhbGciOiJub25lIn0.e30.',
  ]) {
    all.push({
      surface: 'public',
      method: 'GET',
      target: '/api/v1/public/users',
      credential: 'none',
      headers: { authorization },
    });
    all.push({
      surface: 'wider',
      method: 'GET',
      target: '/api/v1/users',
      credential: 'none',
      headers: { authorization },
    });
  }
  for (const credential of ['none', 'read key', 'token'] as const) {
    const oddHeaders: Record<string, string>[] = [
      { 'x-request-id': `svc_${HEX(40)}` },
      { 'x-request-id': 'a b {"level":60} <script>' },
      { 'x-padding': 'p'.repeat(12_000) },
      { accept: 'text/html;q=%ff, */*;q=abc' },
      { 'if-none-match': '*, W/"x", "' },
      { 'content-length': '0', 'content-type': 'application/json' },
    ];
    for (const headers of oddHeaders) {
      all.push({ surface: 'public', method: 'GET', target: '/api/v1/public/incidents', credential, headers });
      all.push({ surface: 'wider', method: 'GET', target: '/api/v1/incidents', credential, headers });
    }
  }
  for (const credential of ['none', 'read key'] as const) {
    for (const target of ['/admin/%ff', '/admin/%', `/admin/${'a'.repeat(500)}`, '/admin//x']) {
      all.push({ surface: 'admin', method: 'GET', target, credential });
    }
  }
  return all;
}

/** Requests the HTTP parser refuses before they are requests: no path, no credential to check. */
const UNREADABLE = [
  'GARBAGE\r\n\r\n',
  'GET /api/v1/public/users HTTP/9.9\r\nHost: x\r\n\r\n',
  'GET /api/v1/public/inc idents HTTP/1.1\r\nHost: x\r\n\r\n',
  'GET /api/v1/public/users HTTP/1.1\r\nBad Header: x\r\n\r\n',
  'FOO /api/v1/public/users HTTP/1.1\r\nHost: x\r\n\r\n',
  'POST /api/v1/public/users HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n',
  'POST /api/v1/public/users HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
  'POST /api/v1/users HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nnothex\r\n\r\n',
  `GET /api/v1/public/users HTTP/1.1\r\nHost: x\r\nX-Huge: ${'h'.repeat(20_000)}\r\n\r\n`,
  'GET /api/v1/public/\x00users HTTP/1.1\r\nHost: x\r\n\r\n',
  'GET http://x\\y/api/v1/users HTTP/1.1\r\nHost: x\r\n\r\n',
  'GET /api/v1/public/users HTTP/1.1\r\nHost: x\r\nX-Bad: a\x01b\r\n\r\n',
  'GET /api/v1/public/users HTTP/1.1\r\nHost: x\r\nX(Bad): x\r\n\r\n',
  'GET /api/v1/public/users HTTP/1.1\r\nHost: x\r\n: no name\r\n\r\n',
  'GET /admin/sign-in HTTP/1.1\r\nHost: x\r\nCookie: a=\x7f\r\n\r\n',
  'POST /integration/v1/oauth2/token HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab',
  'GET /nothing HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n',
];

function json(res: RawResponse): Record<string, unknown> {
  return JSON.parse(res.body) as Record<string, unknown>;
}

function label(c: Case): string {
  const target = c.target.length > 80 ? `${c.target.slice(0, 80)}…` : c.target;
  return `${c.method} ${target} [${c.credential}${c.headers ? ` ${JSON.stringify(c.headers).slice(0, 80)}` : ''}]`;
}

for (const store of STORES) {
  describe(`hostile input (${store})`, () => {
    let ctx: TestContext;
    let port: number;
    const log = captureLog();
    const secrets: Record<Exclude<Credential, 'none'>, string> = {
      'read key': '',
      'write key': '',
      token: '',
    };
    let clientSecret: string;

    before(async () => {
      ctx = await createTestContext(
        store,
        { LOG_LEVEL: 'info', BASE_URL: 'http://127.0.0.1:9' },
        { logStream: log.stream },
      );
      const accountId = await seedAccount(ctx.db, { rate_limit_per_hour: 1_000_000 });
      secrets['read key'] = (await seedKey(ctx.db, accountId)).rawKey;
      secrets['write key'] = (await seedKey(ctx.db, accountId, { scope: 'read-write' })).rawKey;
      const client = await seedClient(ctx.db, accountId);
      clientSecret = client.clientSecret as string;
      const basic = Buffer.from(`${client.clientId}:${clientSecret}`).toString('base64');
      const issued = await ctx.app.inject({
        method: 'POST',
        url: `${OAUTH_PATH}/token`,
        headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({
          grant_type: 'client_credentials',
          scope: 'users:read incidents:read departments:read locations:read',
        }).toString(),
      });
      assert.equal(issued.statusCode, 200, issued.body);
      secrets.token = issued.json().access_token;
      await ctx.app.listen({ port: 0, host: '127.0.0.1' });
      port = (ctx.app.server.address() as AddressInfo).port;
    });
    after(() => ctx.close());

    test('at least 200 distinct malformed requests: contract answers only, credentials first', async () => {
      const all = cases(secrets);
      const distinct = new Set(
        all.map((c) => `${label(c)} ${c.body === undefined ? '' : String(c.body).slice(0, 40)}`),
      );
      assert.ok(distinct.size >= 200, `${distinct.size} distinct requests`);

      for (const c of all) {
        const name = label(c);
        const authorization = c.credential === 'none' ? undefined : `Bearer ${secrets[c.credential]}`;
        const res = await exchange(port, requestBytes(c, authorization));
        assert.ok(res.status >= 200 && res.status < 500, `${name}: ${res.status}`);
        assert.ok(!res.raw.includes('FST_'), `${name}: framework code in ${res.body}`);
        assert.deepEqual(res.errors, [], `${name}: closed cleanly`);

        if (c.surface === 'admin') {
          assert.equal(res.status, 404, name);
          assert.match(res.headers.get('content-type') ?? '', /^text\/html/, name);
          assert.match(res.headers.get('content-security-policy') ?? '', /default-src 'none'/, name);
          assert.equal(res.headers.get('x-frame-options'), 'DENY', name);
          continue;
        }

        const isHead = c.method === 'HEAD';
        const body = isHead ? {} : json(res);
        if (!isHead) {
          assert.ok(!('statusCode' in body), `${name}: ${res.body}`);
          assert.notEqual(body.error, 'Bad Request', name);
        }
        // A body declared over the limit is refused from the request's head, before credentials.
        if (
          c.body !== undefined &&
          Buffer.byteLength(c.body) > BODY_LIMIT_BYTES &&
          !c.headers?.['transfer-encoding']
        ) {
          assert.equal(res.status, 413, name);
          assert.deepEqual(Object.keys(body), ['error', 'message'], name);
          assert.equal(body.error, true, name);
          assert.equal(res.headers.get('connection'), 'close', name);
          continue;
        }
        // A credential of the other API (a key on the wider API, a token on the public one) is none.
        const credentialFits =
          c.headers?.authorization === undefined &&
          (c.surface === 'public' ? c.credential.endsWith('key') : c.credential === 'token');

        if (!credentialFits) {
          assert.equal(res.status, 401, `${name}: credentials are checked first`);
          if (isHead) continue;
          if (c.surface === 'public') {
            // A well-formed key nobody issued is an invalid one; anything else is no key.
            assert.ok(['API_KEY_REQUIRED', 'API_KEY_INVALID'].includes(body.error as string), name);
          } else {
            assert.equal(body.error, true, name);
            assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer realm=/, name);
          }
          assert.equal(typeof body.message, 'string', name);
          continue;
        }

        const writeMethod = !['GET', 'HEAD'].includes(c.method);
        if (c.surface === 'public' && writeMethod && c.credential === 'read key') {
          assert.equal(res.status, 403, name);
          assert.deepEqual(Object.keys(body), ['error', 'message'], name);
          assert.equal(body.error, 'INSUFFICIENT_SCOPE', name);
          continue;
        }
        if (writeMethod) {
          assert.equal(res.status, 405, name);
          assert.equal(res.headers.get('allow'), 'GET, HEAD', name);
          assert.equal(body.error, true, name);
          continue;
        }
        // Every answer of an admitted request carries the allowance.
        assert.ok(res.headers.has('x-ratelimit-remaining'), name);
        if (isHead) {
          assert.ok([200, 404].includes(res.status), `${name}: ${res.status}`);
          assert.equal(res.body, '', name);
          continue;
        }
        switch (res.status) {
          case 200:
            if (c.surface === 'public') {
              assert.equal(body.error, false, name);
              assert.ok('data' in body, name);
            } else {
              assert.ok(Array.isArray(body.response) && typeof body.pagination === 'object', name);
            }
            break;
          case 404:
            assert.deepEqual(Object.keys(body), ['error', 'message'], name);
            assert.equal(body.error, true, name);
            assert.ok(['Not found', 'Incident not found'].includes(body.message as string), name);
            break;
          case 400:
            // Only the wider API's paging parameters may be refused as bad input.
            assert.equal(c.surface, 'wider', name);
            assert.match(c.target, /[?&](_start|_limit)/, name);
            assert.equal(body.error, true, name);
            assert.match(body.message as string, /^_(start|limit) must be/, name);
            break;
          default:
            assert.fail(`${name}: unexpected ${res.status} ${res.body}`);
        }
        // Whatever the id looks like, a key gets the contract's 404 for it, not an error.
        if (c.surface === 'public' && /^\/api\/v1\/public\/incidents\/[^/?]+$/.test(c.target)) {
          assert.equal(res.status, 404, name);
          assert.equal(body.message, 'Incident not found', name);
        }
      }
    });

    test('what the HTTP parser cannot read gets a complete JSON 400 and a clean close', async () => {
      const flood = [
        Buffer.from('GET /api/v1/public/users HTTP/1.1\r\nHost: x\r\nX-Flood: '),
        // Still coming when the parser gives up at its 16 KiB: read and dropped, never a reset.
        ...Array.from({ length: 32 }, () => Buffer.alloc(64 * 1024, 0x68)),
      ];
      const requests: [string, Buffer[]][] = [
        ...UNREADABLE.map((request): [string, Buffer[]] => [request, [Buffer.from(request, 'latin1')]]),
        ['a 2 MiB header', flood],
      ];
      for (const [request, parts] of requests) {
        const name = JSON.stringify(request.slice(0, 60));
        const res = await exchange(port, ...parts);
        assert.equal(res.status, 400, name);
        assert.deepEqual(JSON.parse(res.body), { error: true, message: 'Bad request' }, name);
        assert.equal(res.headers.get('content-type'), 'application/json; charset=utf-8', name);
        assert.equal(Number(res.headers.get('content-length')), Buffer.byteLength(res.body), name);
        assert.equal(res.headers.get('connection'), 'close', name);
        assert.deepEqual(res.errors, [], `${name}: closed cleanly`);
      }
    });

    test('a body over 1 MiB: 413 (or the answer its head earns first), the whole answer, then a clean close', async () => {
      /**
       * `size` bytes in 64 KiB writes: as they are (Content-Length), or each write a chunk, then
       * the last chunk. 2 MiB, and 64 MiB: more than the loopback's socket buffers hold, so that a
       * server closing before it has read everything would reset the connection.
       */
      const body = (size: number, chunked: boolean) => {
        const data = Buffer.alloc(64 * 1024, 0x61);
        const part = chunked ? Buffer.concat([Buffer.from('10000\r\n'), data, Buffer.from('\r\n')]) : data;
        return [
          ...Array.from({ length: size / data.length }, () => part),
          ...(chunked ? [Buffer.from('0\r\n\r\n')] : []),
        ];
      };
      const form = { 'content-type': 'application/x-www-form-urlencoded' };
      const bearer = (credential: Exclude<Credential, 'none'>) => ({
        authorization: `Bearer ${secrets[credential]}`,
      });
      // Without a declared length, only a surface that reads bodies finds it too large; the
      // read-only APIs never read one and answer from the head (`chunked`).
      const targets: {
        method: string;
        target: string;
        headers: Record<string, string>;
        chunked: { status: number; error: unknown };
        html?: true;
        /** Answered by the OAuth provider past Fastify: a FIN after its answer, no `Connection` header. */
        provider?: true;
      }[] = [
        {
          method: 'POST',
          target: '/api/v1/public/incidents',
          headers: {},
          chunked: { status: 401, error: 'API_KEY_REQUIRED' },
        },
        {
          method: 'PUT',
          target: '/api/v1/public/incidents',
          headers: bearer('read key'),
          chunked: { status: 403, error: 'INSUFFICIENT_SCOPE' },
        },
        {
          method: 'POST',
          target: '/api/v1/public/users',
          headers: bearer('write key'),
          chunked: { status: 405, error: true },
        },
        {
          method: 'GET',
          target: '/api/v1/public/users',
          headers: bearer('read key'),
          chunked: { status: 200, error: false },
        },
        {
          method: 'POST',
          target: '/api/v1/users',
          headers: bearer('token'),
          chunked: { status: 405, error: true },
        },
        { method: 'DELETE', target: '/api/v1/nothing', headers: {}, chunked: { status: 401, error: true } },
        {
          method: 'POST',
          target: SIGN_IN_PATH,
          headers: form,
          chunked: { status: 413, error: true },
          html: true,
        },
        {
          method: 'POST',
          target: `${OAUTH_PATH}/token`,
          headers: form,
          // The provider reads a form up to its own 56 KiB, then refuses it in OAuth's shape.
          chunked: { status: 400, error: 'invalid_request' },
          provider: true,
        },
        {
          method: 'POST',
          target: '/nothing',
          headers: { 'content-type': 'application/json' },
          chunked: { status: 413, error: true },
        },
        {
          method: 'POST',
          target: '/healthz',
          headers: { 'content-type': 'text/plain' },
          chunked: { status: 413, error: true },
        },
      ];
      const sizes = [2 * BODY_LIMIT_BYTES, 64 * BODY_LIMIT_BYTES];
      for (const { method, target, headers, chunked: earned, html, provider } of targets) {
        for (const size of sizes) {
          for (const chunked of [false, true]) {
            const name = `${method} ${target} ${size} bytes ${chunked ? 'chunked' : 'with Content-Length'}`;
            const head = Object.entries({
              host: '127.0.0.1',
              ...headers,
              ...(chunked ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(size) }),
            })
              .map(([header, value]) => `${header}: ${value}\r\n`)
              .join('');
            const res = await exchange(
              port,
              Buffer.from(`${method} ${target} HTTP/1.1\r\n${head}\r\n`),
              ...body(size, chunked),
            );
            const expected = chunked ? earned : { status: 413, error: true };
            assert.equal(res.status, expected.status, `${name}: ${res.body.slice(0, 200)}`);
            if (!(chunked && provider)) assert.equal(res.headers.get('connection'), 'close', name);
            assert.deepEqual(res.errors, [], `${name}: closed cleanly`);
            const length = res.headers.get('content-length');
            if (length !== undefined)
              assert.equal(Number(length), Buffer.byteLength(res.body, 'latin1'), name);
            if (html && expected.status === 413) {
              assert.match(res.headers.get('content-type') ?? '', /^text\/html/, name);
              continue;
            }
            assert.match(res.headers.get('content-type') ?? '', /^application\/json/, name);
            const answer = json(res);
            assert.equal(answer.error, expected.error, name);
            if (expected.status === 413) {
              assert.deepEqual(answer, { error: true, message: ApiError.payloadTooLarge().message }, name);
            }
          }
        }
      }
    });

    test('two Authorization headers are no credential: 401 on the public and the wider API', async () => {
      const ask = (target: string, ...authorizations: string[]) =>
        exchange(
          port,
          Buffer.from(
            `GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n` +
              authorizations
                .map((value, i) => `${i % 2 === 0 ? 'Authorization' : 'authorization'}: ${value}\r\n`)
                .join('') +
              '\r\n',
            'latin1',
          ),
        );
      const read = `Bearer ${secrets['read key']}`;
      const write = `Bearer ${secrets['write key']}`;
      const token = `Bearer ${secrets.token}`;
      assert.equal((await ask('/api/v1/public/users', read)).status, 200, 'one key is served');
      assert.equal((await ask('/api/v1/users', token)).status, 200, 'one token is served');

      for (const pair of [
        [read, read],
        [read, write],
        [read, `Bearer svc_${HEX(40)}`],
        [`Bearer svc_${HEX(40)}`, read],
        [read, ''],
        ['', read],
        [`Basic ${Buffer.from('a:b').toString('base64')}`, read],
        [read, token],
        [read, read, read],
      ]) {
        const name = JSON.stringify(pair.map((value) => value.slice(0, 14)));
        const res = await ask('/api/v1/public/users', ...pair);
        assert.equal(res.status, 401, name);
        assert.equal(json(res).error, 'API_KEY_REQUIRED', name);
        assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="safety-api"', name);
        assert.equal(res.headers.get('x-ratelimit-remaining'), undefined, `${name}: nothing counted`);
      }
      for (const pair of [
        [token, token],
        [token, 'Bearer x'],
        ['Bearer x', token],
        [token, read],
      ]) {
        const name = JSON.stringify(pair.map((value) => value.slice(0, 14)));
        const res = await ask('/api/v1/users', ...pair);
        assert.equal(res.status, 401, name);
        assert.deepEqual(Object.keys(json(res)), ['error', 'message'], name);
        assert.equal(json(res).error, true, name);
        // The wider API's answer to a request without a token.
        assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="safety-api"', name);
      }
    });

    test('no key, token or client secret appears in the log, and the requests are there', () => {
      const text = log.text();
      for (const secret of [...Object.values(secrets), clientSecret]) {
        assert.ok(secret.length > 0 && !text.includes(secret), 'a credential is in the log');
      }
      assert.ok(text.includes('/api/v1/public/incidents/%25ff'), 'malformed paths are logged, escaped');
    });
  });
}
