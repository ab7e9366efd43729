import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { openDatabase, type StoreName } from '../../src/db/database.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import {
  bearer,
  createTestDatabase,
  REDIS_URL,
  type ServerProcess,
  STORES,
  seedAccount,
  seedIncidents,
  seedKey,
  startServer,
  type TestDatabase,
} from '../helpers.ts';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from './otlp-receiver.ts';
import { until } from '../wait.ts';

/** OTLP's span kinds. */
const SERVER = 2;
const QUERY_IN_URL = 's3cr3t-in-the-query';

/** A fresh, migrated database of `store` with one account, one key and a few incidents. */
async function seededDatabase(store: StoreName) {
  const database = await createTestDatabase(store);
  const handle = openDatabase(database.url);
  try {
    await migrateToLatest(handle.db);
    // The collector tests send requests for seconds on end: on a quiet machine more than the
    // default 1,000 an hour, which rate limiting (not the subject here) would answer 429.
    const accountId = await seedAccount(handle.db, { rate_limit_per_hour: 1_000_000 });
    await seedIncidents(handle.db, accountId, 3);
    return { database, key: await seedKey(handle.db, accountId) };
  } finally {
    await handle.destroy();
  }
}

/** The span and its parents, up to the root of what was received. */
function ancestry(span: ReceivedSpan, spans: ReceivedSpan[]): ReceivedSpan[] {
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const chain = [span];
  for (let parent = byId.get(span.parentSpanId); parent !== undefined; parent = byId.get(parent.parentSpanId))
    chain.push(parent);
  return chain;
}

const isQuery = (span: ReceivedSpan) =>
  span.attributes['db.system.name'] !== undefined || span.attributes['db.system'] !== undefined;

/** Every string a span carries: its name, attributes, status. */
const textsOf = (span: ReceivedSpan) => [
  span.name,
  ...Object.values(span.attributes).map(String),
  span.status.message ?? '',
];

/** A line of the server's log, parsed; only the JSON ones. */
function logLines(server: ServerProcess): Record<string, unknown>[] {
  return server
    .logs()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

for (const store of STORES) {
  describe(`tracing to an OTLP/HTTP collector (${store})`, () => {
    let receiver: OtlpReceiver;
    let database: TestDatabase;
    let key: { id: string; rawKey: string };
    let server: ServerProcess;

    before(async () => {
      receiver = await startOtlpReceiver();
      ({ database, key } = await seededDatabase(store));
      server = await startServer({
        DATABASE_URL: database.url,
        // PostgreSQL with Redis, as a deployment of several instances: Redis commands are traced too.
        ...(store === 'postgres' ? { REDIS_URL } : {}),
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_SERVICE_NAME: 'safety-api-under-test',
        OTEL_BSP_SCHEDULE_DELAY: '50',
      });
    });

    after(async () => {
      await server?.stop();
      await receiver?.close();
      await database?.drop();
    });

    test('a public request is a server span continuing the caller’s trace, with the key check and the queries inside, its log line carrying the ids, and no secret anywhere', async () => {
      const traceId = randomBytes(16).toString('hex');
      const callerSpanId = randomBytes(8).toString('hex');
      const response = await fetch(`${server.url}/api/v1/public/incidents?limit=2&token=${QUERY_IN_URL}`, {
        headers: { ...bearer(key.rawKey), traceparent: `00-${traceId}-${callerSpanId}-01` },
      });
      assert.equal(response.status, 200);
      const requestId = response.headers.get('x-request-id');

      const inTrace = (spans: ReceivedSpan[]) => spans.filter((span) => span.traceId === traceId);
      const spans = inTrace(
        await receiver.waitFor((all) => {
          const mine = inTrace(all);
          return (
            mine.some((span) => span.kind === SERVER) &&
            mine.some((span) => span.attributes['api_key.source'] === 'lookup') &&
            mine.some((span) => span.name === 'rate_limit.decision') &&
            mine.some(isQuery)
          );
        }),
      );

      const request = spans.find((span) => span.kind === SERVER) as ReceivedSpan;
      assert.equal(request.name, 'GET /api/v1/public/incidents');
      assert.equal(request.attributes['http.route'], '/api/v1/public/incidents');
      assert.equal(request.attributes['http.response.status_code'], 200);
      assert.equal(request.attributes['url.path'], '/api/v1/public/incidents');
      // The caller's span is the parent: the trace goes on across the call.
      assert.equal(request.parentSpanId, callerSpanId);
      assert.equal(request.resource['service.name'], 'safety-api-under-test');

      // The key's row is looked up (in its cache, then the store): with PostgreSQL and Redis, after
      // a look among the rows held in memory, which finds none on a first request.
      const keyChecks = spans.filter((span) => span.name === 'api_key.check');
      for (const check of keyChecks) assert.equal(check.parentSpanId, request.spanId);
      const keyCheck = keyChecks.find(
        (span) => span.attributes['api_key.source'] === 'lookup',
      ) as ReceivedSpan;
      assert.equal(keyCheck.attributes['api_key.found'], true);
      const decision = spans.find((span) => span.name === 'rate_limit.decision') as ReceivedSpan;
      assert.equal(decision.parentSpanId, request.spanId);
      assert.equal(decision.attributes['rate_limit.allowed'], true);
      // Every query of the request is inside its span; the key's lookup among them, under the key check.
      const queries = spans.filter(isQuery);
      if (process.env.DEBUG_SPANS)
        console.log(
          JSON.stringify(
            spans.map((s) => [s.name, s.spanId, s.parentSpanId, s.attributes]),
            null,
            1,
          ),
        );
      for (const query of queries) assert.ok(ancestry(query, spans).includes(request), query.name);
      assert.ok(
        queries.some((query) => ancestry(query, spans).includes(keyCheck)),
        'no query under the key check',
      );
      if (store === 'postgres') {
        assert.ok(
          spans.some(
            (span) =>
              span.attributes['db.system'] === 'redis' || span.attributes['db.system.name'] === 'redis',
          ),
          `no Redis command in ${spans.map((s) => s.name).join(', ')}`,
        );
      }

      // The request's log line carries its trace and span ids. The server writes it once the answer
      // is sent: it may reach this process after the answer did.
      const completedLine = () =>
        logLines(server).find((line) => line.reqId === requestId && line.msg === 'request completed');
      await until(
        () => completedLine() !== undefined,
        10_000,
        () => `the request's log line in\n${server.logs()}`,
      );
      const completed = completedLine();
      assert.ok(completed !== undefined, server.logs());
      assert.equal(completed.trace_id, traceId);
      assert.ok(spans.some((span) => span.spanId === completed.span_id));

      // No span holds the key, a secret of the query string, or any query string at all.
      for (const span of receiver.spans) {
        for (const text of textsOf(span)) {
          assert.ok(!text.includes(key.rawKey), `${span.name} holds the key`);
          assert.ok(!text.includes(QUERY_IN_URL), `${span.name} holds a query's secret: ${text}`);
          assert.ok(!text.includes('limit=2'), `${span.name} holds a query string: ${text}`);
        }
      }
      for (const body of receiver.bodies) {
        assert.ok(!body.includes(key.rawKey.slice(4)), 'an export holds the key');
        assert.ok(!body.includes(QUERY_IN_URL), 'an export holds the query');
      }
    });

    test('a feed page and an export have spans of their own inside their requests, with the queries inside those', async () => {
      const traced = async (path: string) => {
        const traceId = randomBytes(16).toString('hex');
        const response = await fetch(`${server.url}${path}`, {
          headers: {
            ...bearer(key.rawKey),
            traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01`,
          },
        });
        assert.equal(response.status, 200);
        await response.arrayBuffer();
        return traceId;
      };
      const feed = await traced('/api/v1/public/changes?limit=2');
      const exported = await traced('/api/v1/public/exports/incidents.csv');
      const spans = await receiver.waitFor(
        (all) =>
          all.some((span) => span.traceId === feed && span.name === 'feed.page') &&
          all.some(
            (span) =>
              span.traceId === exported && span.name === 'export.page' && span.attributes['page.items'] === 3,
          ) &&
          all.some((span) => span.traceId === exported && span.kind === SERVER),
      );
      const page = spans.find((span) => span.traceId === feed && span.name === 'feed.page') as ReceivedSpan;
      assert.equal(page.attributes['page.items'], 2);
      assert.ok(spans.some((span) => isQuery(span) && ancestry(span, spans).includes(page)));
      const exportPage = spans.find(
        (span) =>
          span.traceId === exported && span.name === 'export.page' && span.attributes['page.items'] === 3,
      ) as ReceivedSpan;
      assert.equal(exportPage.attributes['export.resource'], 'incidents');
      assert.equal(exportPage.attributes['page.number'], 1);
      assert.ok(spans.some((span) => isQuery(span) && ancestry(span, spans).includes(exportPage)));
      assert.equal(
        exportPage.parentSpanId,
        spans.find((span) => span.traceId === exported && span.kind === SERVER)?.spanId,
      );
    });
  });
}

/** A collector that accepts connections and never answers: a frozen one. */
async function frozenCollector(): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}

/** The value of `tracing_spans_dropped_total{reason=…}` in the server's /metrics. */
async function dropped(server: ServerProcess, reason: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const match = new RegExp(`^tracing_spans_dropped_total\\{reason="${reason}"\\} (\\d+)`, 'm').exec(text);
  assert.ok(match !== null, `no tracing_spans_dropped_total{reason="${reason}"} in /metrics`);
  return Number(match[1]);
}

describe('a collector that does not answer', () => {
  let database: TestDatabase;
  let key: { id: string; rawKey: string };

  before(async () => {
    ({ database, key } = await seededDatabase('sqlite'));
  });
  after(async () => {
    await database?.drop();
  });

  /** Page-1 requests, one after another for `ms`: the slowest one's time. */
  async function slowestRequest(server: ServerProcess, ms: number): Promise<number> {
    let slowest = 0;
    for (const end = Date.now() + ms; Date.now() < end;) {
      const started = performance.now();
      const response = await fetch(`${server.url}/api/v1/public/incidents?limit=2`, {
        headers: bearer(key.rawKey),
      });
      await response.arrayBuffer();
      assert.equal(response.status, 200);
      slowest = Math.max(slowest, performance.now() - started);
      if (process.env.DEBUG_SPANS) console.log(Math.round(performance.now() - started));
    }
    return slowest;
  }

  test('frozen: requests are not delayed, and the spans that do not fit the queue are dropped and counted', async () => {
    const collector = await frozenCollector();
    const server = await startServer({
      DATABASE_URL: database.url,
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '10',
      OTEL_BSP_MAX_QUEUE_SIZE: '8',
      OTEL_EXPORTER_OTLP_TIMEOUT: '30000',
    });
    try {
      // The first export hangs (for the exporter's 30 s) while requests go on, and the queue fills.
      // A request that waited for the collector would take that long; one that does not, a few ms
      // (a second is left for a busy machine; the first requests, which warm the server, apart).
      await slowestRequest(server, 500);
      const slowest = await slowestRequest(server, 3000);
      assert.ok(slowest < 1000, `a request took ${Math.round(slowest)} ms`);
      assert.ok((await dropped(server, 'queue_full')) > 0);
    } finally {
      await server.stop();
      await collector.close();
    }
  });

  test('refusing connections: requests are not delayed, and the spans of failed exports are counted', async () => {
    const collector = await frozenCollector();
    const closedUrl = collector.url;
    await collector.close();
    const server = await startServer({
      DATABASE_URL: database.url,
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${closedUrl}/v1/traces`,
      OTEL_BSP_SCHEDULE_DELAY: '10',
      OTEL_EXPORTER_OTLP_TIMEOUT: '500',
    });
    try {
      await slowestRequest(server, 500);
      const slowest = await slowestRequest(server, 1000);
      assert.ok(slowest < 1000, `a request took ${Math.round(slowest)} ms`);
      await until(async () => (await dropped(server, 'export_failed')) > 0, 20_000, 'export_failed counted');
    } finally {
      await server.stop();
    }
  });
});
