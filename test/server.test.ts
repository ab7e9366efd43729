import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { openDatabase, type StoreName } from '../src/db/database.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { heapGrowthFlag } from '../src/server.ts';
import { freePort, startRedis, startRelay } from './faults/harness.ts';
import {
  bearer,
  createTestDatabase,
  REDIS_URL,
  type ServerProcess,
  STORES,
  seedAccount,
  seedKey,
  startServer,
  type TestDatabase,
} from './helpers.ts';
import { sleep, until } from './wait.ts';

/** A raw client connection that records what the server sends and how the connection ends. */
interface RawConnection {
  socket: Socket;
  received: () => string;
  /** Resolves when the server ends the connection: `fin` (a clean close) or the socket error code. */
  ended: Promise<'fin' | string>;
}

async function rawConnection(port: number): Promise<RawConnection> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let data = '';
  socket.on('data', (chunk) => {
    data += chunk;
  });
  const ended = new Promise<'fin' | string>((resolve) => {
    socket.once('end', () => resolve('fin'));
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
  return { socket, received: () => data, ended };
}

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Splits what a connection received into responses (each with a Content-Length). */
function responsesIn(text: string): RawResponse[] {
  const responses: RawResponse[] = [];
  let rest = text;
  while (rest.length > 0) {
    const headEnd = rest.indexOf('\r\n\r\n');
    if (headEnd < 0) break;
    const [statusLine = '', ...lines] = rest.slice(0, headEnd).split('\r\n');
    const headers = Object.fromEntries(
      lines.map((line) => [
        line.slice(0, line.indexOf(':')).toLowerCase(),
        line.slice(line.indexOf(':') + 1).trim(),
      ]),
    );
    const length = Number(headers['content-length'] ?? 0);
    const bodyStart = headEnd + 4;
    responses.push({
      status: Number(statusLine.split(' ')[1]),
      headers,
      body: rest.slice(bodyStart, bodyStart + length),
    });
    rest = rest.slice(bodyStart + length);
  }
  return responses;
}

/** Within `ms`, or `'still open'`. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'still open'> {
  return Promise.race([promise, sleep(ms).then(() => 'still open' as const)]);
}

const SIGN_IN_BODY = 'email=a%40example.test&password=x&_csrf=forged';
/** A sign-in form posted in two parts: the headers and the first byte now, the rest later. */
function startSignInPost(connection: RawConnection): { finish(pipelined?: string): void } {
  connection.socket.write(
    'POST /admin/sign-in HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n' +
      `Content-Length: ${SIGN_IN_BODY.length}\r\n\r\n${SIGN_IN_BODY.slice(0, 1)}`,
  );
  return { finish: (pipelined = '') => connection.socket.write(SIGN_IN_BODY.slice(1) + pipelined) };
}

/** Resolves once `server` has logged a line matching `line` (fails after 10 s, naming `what`). */
function logged(server: ServerProcess, line: RegExp, what: string): Promise<void> {
  return until(() => line.test(server.logs()), 10_000, what, 20);
}

/** Fastify's line for a sign-in request whose head the server has read: it is in flight. */
const SIGN_IN_RECEIVED = /"url":"\/admin\/sign-in"[^\n]*"msg":"incoming request"/;

/**
 * Waits for the process to exit (killing it past `maxMs` and a margin) and asserts its exit code
 * and that it took from `minMs` to under `maxMs` from now.
 */
async function assertExits(server: ServerProcess, code: number, maxMs: number, minMs = 0): Promise<void> {
  const exit = await server.exited(maxMs + 10_000);
  assert.equal(exit.code, code);
  assert.ok(exit.ms >= minMs && exit.ms < maxMs, `exited after ${Math.round(exit.ms)} ms`);
}

/** A fresh, migrated database of `store` with one account and one key of it. */
async function seededDatabase(
  store: StoreName,
  account: Parameters<typeof seedAccount>[1] = {},
): Promise<{ database: TestDatabase; key: { id: string; rawKey: string } }> {
  const database = await createTestDatabase(store);
  const handle = openDatabase(database.url);
  try {
    await migrateToLatest(handle.db);
    return { database, key: await seedKey(handle.db, await seedAccount(handle.db, account)) };
  } finally {
    await handle.destroy();
  }
}

const UNAVAILABLE = { error: true, message: 'Service temporarily unavailable' };
const DEADLINE_LINE = /shutdown did not finish in time/;

for (const store of STORES) {
  describe(`two server processes on one database and Redis (${store})`, () => {
    let database: TestDatabase;
    let servers: ServerProcess[];
    let key: { id: string; rawKey: string };

    before(async () => {
      ({ database, key } = await seededDatabase(store, { rate_limit_per_hour: 6 }));
      const env = { DATABASE_URL: database.url, REDIS_URL };
      servers = await Promise.all([startServer(env), startServer(env)]);
    });
    after(async () => {
      await Promise.all(servers.map((s) => s.stop()));
      await database.drop();
    });

    test('share one hourly allowance, log JSON with request ids, never the key, and record last use on stop', async () => {
      const statuses: number[] = [];
      const remaining: string[] = [];
      for (let i = 0; i < 8; i += 1) {
        const server = servers[i % 2]!;
        const res = await fetch(`${server.url}/api/v1/public/departments`, {
          headers: { ...bearer(key.rawKey), 'x-request-id': `req-${i}` },
        });
        statuses.push(res.status);
        remaining.push(res.headers.get('x-ratelimit-remaining') ?? '');
        assert.equal(res.headers.get('x-request-id'), `req-${i}`);
        await res.arrayBuffer();
      }
      assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200, 429, 429]);
      assert.deepEqual(remaining, ['5', '4', '3', '2', '1', '0', '0', '0']);

      for (const server of servers) {
        const lines = server
          .logs()
          .split('\n')
          .filter((line) => line.startsWith('{'));
        assert.ok(lines.length > 0);
        for (const line of lines) JSON.parse(line);
        assert.ok(lines.some((line) => /"reqId":"req-\d"/.test(line)));
        assert.ok(!server.logs().includes(key.rawKey), 'the raw key never appears in a log line');
        assert.ok(!server.logs().includes(key.rawKey.slice(4)), 'nor its hex part');
      }

      assert.deepEqual(await Promise.all(servers.map((s) => s.stop())), [0, 0]);
      const handle = openDatabase(database.url);
      const row = await handle.db
        .selectFrom('api_keys')
        .select('last_used_at')
        .where('id', '=', key.id)
        .executeTakeFirstOrThrow();
      await handle.destroy();
      assert.ok(row.last_used_at !== null, 'last use is written when the server stops');
      servers = [];
    });
  });
}

for (const store of STORES) {
  describe(`graceful shutdown on SIGTERM (${store})`, () => {
    let database: TestDatabase;
    let key: { id: string; rawKey: string };

    before(async () => {
      ({ database, key } = await seededDatabase(store));
    });
    after(() => database.drop());

    test('in-flight request finishes, idle connection gets FIN, a later request on an open connection gets 503 with Connection: close, last use is written, exit 0', async () => {
      const server = await startServer({ DATABASE_URL: database.url });
      try {
        const used = await fetch(`${server.url}/api/v1/public/departments`, {
          headers: { ...bearer(key.rawKey), connection: 'close' },
        });
        assert.equal(used.status, 200);
        await used.arrayBuffer();

        const idle = await rawConnection(server.port);
        idle.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
        const inFlight = await rawConnection(server.port);
        const post = startSignInPost(inFlight);
        await logged(server, SIGN_IN_RECEIVED, 'the sign-in request to be in flight');
        await until(() => idle.received().includes('\r\n\r\n'), 10_000, "the idle connection's answer", 20);

        server.signal('SIGTERM');
        assert.equal(await within(idle.ended, 3000), 'fin', 'the idle connection is closed cleanly');
        assert.equal(responsesIn(idle.received()).length, 1);

        post.finish('GET /api/v1/public/departments HTTP/1.1\r\nHost: x\r\n\r\n');
        assert.equal(await within(inFlight.ended, 3000), 'fin');
        const [finished, later, ...more] = responsesIn(inFlight.received());
        assert.equal(finished?.status, 403, 'the in-flight request is answered (a forged form: 403)');
        assert.match(finished?.body ?? '', /<html/i);
        assert.equal(later?.status, 503);
        assert.deepEqual(JSON.parse(later?.body ?? ''), UNAVAILABLE);
        assert.equal(later?.headers.connection, 'close');
        assert.ok(Number(later?.headers['retry-after']) >= 1);
        assert.deepEqual(more, []);

        const { code } = await server.exited(20_000);
        assert.equal(code, 0);
        assert.doesNotMatch(server.logs(), DEADLINE_LINE);
      } finally {
        await server.stop();
      }
      const handle = openDatabase(database.url);
      const row = await handle.db
        .selectFrom('api_keys')
        .select('last_used_at')
        .where('id', '=', key.id)
        .executeTakeFirstOrThrow();
      await handle.destroy();
      assert.ok(row.last_used_at !== null, 'last use is written when the server stops');
    });

    test('a connection whose request was in flight is closed once answered, and the process exits at once', async () => {
      const server = await startServer({ DATABASE_URL: database.url });
      try {
        const inFlight = await rawConnection(server.port);
        const post = startSignInPost(inFlight);
        await logged(server, SIGN_IN_RECEIVED, 'the sign-in request to be in flight');
        server.signal('SIGTERM');
        await logged(server, /"msg":"shutting down"/, 'the shutdown to begin');
        post.finish();
        // Kept alive after its answer, the connection would hold the process for 72 s.
        assert.equal(await within(inFlight.ended, 3000), 'fin');
        assert.equal(responsesIn(inFlight.received())[0]?.status, 403);
        await assertExits(server, 0, 3000);
      } finally {
        await server.stop();
      }
    });
  });
}

describe('shutdown deadline and hung stores', () => {
  let database: TestDatabase;
  let key: { id: string; rawKey: string };
  const store = STORES.includes('postgres') ? 'postgres' : 'sqlite';

  before(async () => {
    ({ database, key } = await seededDatabase(store));
  });
  after(() => database.drop());

  test('a request that never completes does not keep the process: one log line and exit 1 at the 10 s deadline', async () => {
    const server = await startServer({ DATABASE_URL: database.url });
    try {
      const stuck = await rawConnection(server.port);
      startSignInPost(stuck); // and never the rest
      await logged(server, SIGN_IN_RECEIVED, 'the sign-in request to be in flight');
      server.signal('SIGTERM');
      await assertExits(server, 1, 15_000, 9000);
      assert.equal(
        server
          .logs()
          .split('\n')
          .filter((line) => DEADLINE_LINE.test(line)).length,
        1,
      );
      stuck.socket.destroy();
    } finally {
      await server.stop();
    }
  });

  test('a frozen Redis (SIGSTOP) does not hold up the shutdown', async () => {
    const redis = await startRedis();
    const server = await startServer({ DATABASE_URL: database.url, REDIS_URL: redis.url });
    try {
      const res = await fetch(`${server.url}/api/v1/public/users`, {
        headers: { ...bearer(key.rawKey), connection: 'close' },
      });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
      redis.process.kill('SIGSTOP');
      server.signal('SIGTERM');
      await assertExits(server, 0, 5000);
    } finally {
      await server.stop();
      await redis.stop();
    }
  });
});

describe('METRICS_PORT', () => {
  test('serve also listens for /metrics on METRICS_PORT (loopback), not on the main port, and still stops at once', async () => {
    const database = await createTestDatabase('sqlite');
    const metricsPort = await freePort();
    const server = await startServer({ DATABASE_URL: database.url, METRICS_PORT: String(metricsPort) });
    try {
      // Logged just after the main port's line, which startServer waits for.
      const listening = new RegExp(`metrics listening at http://127\\.0\\.0\\.1:${metricsPort}/metrics`);
      await logged(server, listening, 'the metrics port to listen');
      assert.equal((await fetch(`${server.url}/metrics`)).status, 404);
      // A scraper's connection, kept alive.
      const scrape = await rawConnection(metricsPort);
      scrape.socket.write('GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n');
      await until(() => /http_requests_total/.test(scrape.received()), 10_000, "the scrape's answer", 20);
      assert.equal(responsesIn(scrape.received())[0]?.status, 200);

      server.signal('SIGTERM');
      await assertExits(server, 0, 3000);
    } finally {
      await server.stop();
      await database.drop();
    }
  });
});

describe('HTTP timeouts', () => {
  let database: TestDatabase;
  let server: ServerProcess;

  before(async () => {
    database = await createTestDatabase('sqlite');
    server = await startServer({ DATABASE_URL: database.url });
  });
  after(async () => {
    await server.stop();
    await database.drop();
  });

  test('a client that sends its headers a byte at a time is cut off with 408 about 10 s after it began', async () => {
    const slow = await rawConnection(server.port);
    const request = `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: ${'a'.repeat(200)}`;
    let sent = 0;
    const drip = setInterval(() => {
      if (!slow.socket.writable) return;
      slow.socket.write(request.charAt(sent % request.length));
      sent += 1;
    }, 250);
    const started = performance.now();
    try {
      // Node's own default (60 s, checked every 30 s) would leave it open for up to 90 s.
      assert.equal(await within(slow.ended, 15_000), 'fin');
      const ms = performance.now() - started;
      assert.ok(ms >= 9000, `cut off after ${Math.round(ms)} ms`);
      const [response] = responsesIn(slow.received());
      assert.equal(response?.status, 408);
      // The contract's error shape, not Node's or Fastify's.
      assert.deepEqual(Object.keys(JSON.parse(response?.body ?? '{}')), ['error', 'message']);
      assert.equal(JSON.parse(response?.body ?? '{}').error, true);
    } finally {
      clearInterval(drip);
      slow.socket.destroy();
    }
  });
});

if (STORES.includes('postgres')) {
  describe('shutdown with a frozen PostgreSQL', () => {
    let database: TestDatabase;
    let key: { id: string; rawKey: string };

    before(async () => {
      database = await createTestDatabase('postgres');
      const handle = openDatabase(database.url);
      await migrateToLatest(handle.db);
      key = await seedKey(handle.db, await seedAccount(handle.db));
      await handle.destroy();
    });
    after(() => database.drop());

    test('the process exits, bounded by the store deadline', async () => {
      const relay = await startRelay(database.url);
      const server = await startServer({ DATABASE_URL: relay.url });
      try {
        // Several at once: the pool then holds several idle connections to the frozen server.
        const answers = await Promise.all(
          Array.from({ length: 6 }, () =>
            fetch(`${server.url}/api/v1/public/users`, {
              headers: { ...bearer(key.rawKey), connection: 'close' },
            }),
          ),
        );
        for (const res of answers) {
          assert.equal(res.status, 200);
          await res.arrayBuffer();
        }
        relay.freeze();
        server.signal('SIGTERM');
        // The last-use write meets the store's deadline (about 2.5 s); closing the pool does not wait
        // for a server that does not answer.
        await assertExits(server, 0, 9000);
      } finally {
        await server.stop();
        await relay.close();
      }
    });
  });
}

describe('V8 heap growth', () => {
  test('serve sets the old generation to grow by at most 100% between full collections', () => {
    assert.equal(heapGrowthFlag([]), '--heap-growing-percent=100');
    assert.equal(
      heapGrowthFlag(['--max-semi-space-size=16', '--enable-source-maps']),
      '--heap-growing-percent=100',
    );
  });

  test("node's own --heap-growing-percent, in either spelling, is kept", () => {
    assert.equal(heapGrowthFlag(['--heap-growing-percent=30']), null);
    assert.equal(heapGrowthFlag(['--max-semi-space-size=16', '--heap_growing_percent=50']), null);
    assert.equal(heapGrowthFlag(['--heap-growing-percent', '30']), null);
    assert.equal(heapGrowthFlag(['--heap-growing-percentage=30']), '--heap-growing-percent=100');
  });
});
