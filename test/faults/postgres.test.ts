import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import * as oidc from 'openid-client';
import pg from 'pg';
import { REQUEST_STORE_BUDGET_MS } from '../../src/db/store-context.ts';
import { INTEGRATIONS_PATH, OAUTH_PATH } from '../../src/paths.ts';
import { bearer, STORES, seedAccount, seedKey, seedManyIncidents } from '../helpers.ts';
import { discover, seedClient } from '../oauth/harness.ts';
import { AdminClient, seedUser as seedAdmin } from '../routes/admin/admin-helpers.ts';
import {
  createFaultContext,
  type FaultContext,
  freePort,
  ownDatabaseName,
  startRelay,
  terminateBackends,
  timed,
  withAdminClient,
} from './harness.ts';
import { sleep, until } from '../wait.ts';

/** Generous bound for an answer while the database is stuck: the store deadline is ~2.5 s. */
const STUCK_MAX_MS = 3000;
const UNAVAILABLE = { error: true, message: 'Service temporarily unavailable' };

function assertUnavailable(res: { statusCode: number; headers: Record<string, unknown> }, what: string) {
  assert.equal(res.statusCode, 503, what);
  const retryAfter = Number(res.headers['retry-after']);
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `${what}: Retry-After`);
}

/** Once the store is back: exactly one warn line for the outage and one info line for the recovery. */
async function assertOneOutageLogged(ctx: FaultContext, linesBefore: number): Promise<void> {
  await until(
    async () => ctx.lines.slice(linesBefore).some((l) => l.level === 'info'),
    10_000,
    'the recovery line',
    200,
  );
  const outage = ctx.lines.slice(linesBefore);
  assert.deepEqual(
    outage.map((l) => l.level),
    ['warn', 'info'],
    `one line down, one line up: ${JSON.stringify(outage)}`,
  );
  assert.match(outage[0]?.message ?? '', /unavailable/);
  assert.match(outage[1]?.message ?? '', /available again/);
}

if (STORES.includes('postgres')) {
  describe('PostgreSQL connections killed while in use (pg_terminate_backend)', () => {
    let ctx: FaultContext;
    let rawKey: string;

    before(async () => {
      ctx = await createFaultContext('postgres');
      const accountId = await seedAccount(ctx.db, { rate_limit_per_hour: 100_000 });
      ({ rawKey } = await seedKey(ctx.db, accountId));
    });
    after(() => ctx?.close());

    const get = () =>
      ctx.app.inject({ method: 'GET', url: '/api/v1/public/departments', headers: bearer(rawKey) });

    test('20 concurrent requests, then every backend terminated, 5 times: the process lives on, answers are 200 or 503, then 200', async () => {
      for (let round = 0; round < 5; round += 1) {
        const inFlight = Array.from({ length: 20 }, get);
        await terminateBackends(ctx.databaseUrl);
        for (const res of await Promise.all(inFlight)) {
          if (res.statusCode !== 200) assertUnavailable(res, `round ${round}`);
        }
        await until(async () => (await get()).statusCode === 200, 10_000, `round ${round}: 200 again`, 200);
      }
      const after = await Promise.all(Array.from({ length: 20 }, get));
      assert.deepEqual(
        after.map((r) => r.statusCode),
        Array(20).fill(200),
      );
    });
  });

  describe('PostgreSQL table locked by another session (~8 s)', () => {
    let ctx: FaultContext;
    let rawKey: string;

    before(async () => {
      ctx = await createFaultContext('postgres');
      const accountId = await seedAccount(ctx.db, { rate_limit_per_hour: 100_000 });
      ({ rawKey } = await seedKey(ctx.db, accountId));
    });
    after(() => ctx?.close());

    const get = () =>
      ctx.app.inject({ method: 'GET', url: '/api/v1/public/departments', headers: bearer(rawKey) });

    test('every request is answered within ~3 s with 503 + Retry-After; after release, 200 without restart', async () => {
      assert.equal((await get()).statusCode, 200);
      const linesBefore = ctx.lines.length;
      const lockUrl = ctx.databaseUrl;
      let release: () => void = () => {};
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      let locked: () => void = () => {};
      const isLocked = new Promise<void>((resolve) => {
        locked = resolve;
      });
      const holder = (async () => {
        const client = new pg.Client({ connectionString: lockUrl });
        await client.connect();
        try {
          await client.query('BEGIN');
          await client.query('LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE');
          locked();
          // Held until every request below is answered (about 8 s), at most 20 s.
          await Promise.race([released, sleep(20_000)]);
          await client.query('COMMIT');
        } finally {
          await client.end();
        }
      })();
      await isLocked;

      const answers: { res: LightMyRequestResponse; ms: number }[] = [];
      const loadEnds = Date.now() + 6000;
      const batches: Promise<void>[] = [];
      while (Date.now() < loadEnds) {
        batches.push(
          Promise.all(Array.from({ length: 5 }, () => timed(get))).then((batch) => {
            for (const { result, ms } of batch) answers.push({ res: result, ms });
          }),
        );
        await sleep(300);
      }
      await Promise.all(batches);
      release();
      await holder;

      assert.ok(answers.length >= 50, `${answers.length} requests answered`);
      for (const { res, ms } of answers) {
        assertUnavailable(res, 'while locked');
        assert.deepEqual(res.json(), UNAVAILABLE);
        assert.ok(ms < STUCK_MAX_MS, `answered in ${Math.round(ms)} ms`);
      }
      await until(async () => (await get()).statusCode === 200, 10_000, '200 again after release', 200);

      // `select 1` answers all along, but the outage lasts while requests fail: one line each way,
      // not a down and an up line per probe.
      await assertOneOutageLogged(ctx, linesBefore);
    });
  });

  describe('PostgreSQL slowed to 1 s each way', () => {
    let ctx: FaultContext;
    let rawKey: string;
    let relay: Awaited<ReturnType<typeof startRelay>>;

    before(async () => {
      ctx = await createFaultContext('postgres', {}, async (url) => {
        relay = await startRelay(url);
        return relay.url;
      });
      const accountId = await seedAccount(ctx.db, { rate_limit_per_hour: 100_000 });
      ({ rawKey } = await seedKey(ctx.db, accountId));
    });
    after(async () => {
      await ctx?.close();
      await relay?.close();
    });

    // An id never asked for: no cached answer, so the key row and the incident are both read.
    const get = () =>
      ctx.app.inject({
        method: 'GET',
        url: `/api/v1/public/incidents/${randomUUID()}`,
        headers: bearer(rawKey),
      });

    test('a request that needs two statements (the key row, then the incident) gets its 503 within one budget, not one per statement', async () => {
      // Connections opened while quick, so that the slowness meets statements, not logins.
      assert.deepEqual(
        (await Promise.all(Array.from({ length: 5 }, get))).map((res) => res.statusCode),
        [404, 404, 404, 404, 404],
      );
      relay.slow(1000);
      try {
        // Each statement now takes about 2 s, within its own deadline: the key row is read, and the
        // incident would be too, 4 s after the request came, had it a deadline of its own.
        const answers = await Promise.all(Array.from({ length: 3 }, () => timed(get)));
        for (const { result, ms } of answers) {
          assertUnavailable(result, 'slowed');
          assert.ok(ms < REQUEST_STORE_BUDGET_MS + 1000, `answered in ${Math.round(ms)} ms`);
        }
      } finally {
        relay.slow(0);
      }
      await until(async () => (await get()).statusCode === 404, 10_000, 'answered again', 200);
    });
  });

  describe('PostgreSQL database refusing connections', () => {
    let ctx: FaultContext;
    let baseUrl: string;
    let rawKey: string;
    let accessToken: string;
    let client: { clientId: string; clientSecret: string | null };
    let admin: AdminClient;

    before(async () => {
      const port = await freePort();
      baseUrl = `http://127.0.0.1:${port}`;
      ctx = await createFaultContext('postgres', { BASE_URL: baseUrl });
      await ctx.app.listen({ port, host: '127.0.0.1' });
      const accountId = await seedAccount(ctx.db, { rate_limit_per_hour: 100_000 });
      ({ rawKey } = await seedKey(ctx.db, accountId));
      client = await seedClient(ctx.db, accountId);
      const server = { ctx, baseUrl, issuer: new URL(`${baseUrl}${OAUTH_PATH}`), close: () => ctx.close() };
      const config = await discover(server, client.clientId, client.clientSecret);
      accessToken = (await oidc.clientCredentialsGrant(config, { scope: 'users:read' })).access_token;
      const person = await seedAdmin(ctx.db, accountId);
      admin = new AdminClient(ctx.app);
      assert.equal((await admin.signIn(person.email)).statusCode, 303);
    });
    after(async () => {
      await setAllowConnections(true);
      await ctx?.close();
    });

    async function setAllowConnections(allow: boolean): Promise<void> {
      const name = ownDatabaseName(ctx.databaseUrl);
      await withAdminClient((c) => c.query(`ALTER DATABASE ${name} WITH ALLOW_CONNECTIONS ${allow}`));
    }

    const publicGet = () =>
      ctx.app.inject({ method: 'GET', url: '/api/v1/public/departments', headers: bearer(rawKey) });
    const widerGet = () =>
      ctx.app.inject({
        method: 'GET',
        url: '/api/v1/users',
        headers: { authorization: `Bearer ${accessToken}` },
      });
    const adminGet = () => admin.get(INTEGRATIONS_PATH);
    const tokenPost = async () => {
      const res = await fetch(`${baseUrl}${OAUTH_PATH}/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`${client.clientId}:${client.clientSecret}`).toString('base64')}`,
        },
        body: 'grant_type=client_credentials&scope=users%3Aread',
      });
      return { statusCode: res.status, headers: Object.fromEntries(res.headers), body: await res.text() };
    };

    test('503 + Retry-After on the public, wider, admin and OAuth surfaces; recovery without restart; one log line each way', async () => {
      assert.equal((await publicGet()).statusCode, 200);
      assert.equal((await widerGet()).statusCode, 200);
      assert.equal((await adminGet()).statusCode, 200);
      assert.equal((await tokenPost()).statusCode, 200);
      const linesBefore = ctx.lines.length;

      await setAllowConnections(false);
      try {
        await terminateBackends(ctx.databaseUrl);
        for (let round = 0; round < 3; round += 1) {
          const pub = await publicGet();
          assertUnavailable(pub, 'public API');
          assert.deepEqual(pub.json(), UNAVAILABLE);

          const wider = await widerGet();
          assertUnavailable(wider, 'wider API');
          assert.deepEqual(wider.json(), UNAVAILABLE);
          assert.equal(wider.headers['www-authenticate'], undefined, 'the token is not called invalid');

          const page = await adminGet();
          assertUnavailable(page, 'admin panel');
          assert.match(String(page.headers['content-type']), /text\/html/);
          assert.equal(page.headers['x-frame-options'], 'DENY', 'with the panel security headers');

          const token = await tokenPost();
          assertUnavailable(token, 'OAuth token endpoint');
          assert.deepEqual(JSON.parse(token.body), UNAVAILABLE);
        }
        // The outage outlives a few probes (about one a second).
        await sleep(2500);
      } finally {
        await setAllowConnections(true);
      }

      await until(async () => (await publicGet()).statusCode === 200, 10_000, 'public 200 again', 200);
      assert.equal((await widerGet()).statusCode, 200);
      assert.equal((await adminGet()).statusCode, 200);
      assert.equal((await tokenPost()).statusCode, 200);

      await assertOneOutageLogged(ctx, linesBefore);
    });
  });

  /**
   * PostgreSQL streams through `COPY (…) TO STDOUT` an export of incidents as NDJSON (the snapshot's
   * `copyOut`) and each changes-feed page (`Store.copyRows`). An export's response has begun when
   * its COPY dies: the body's stream fails, and Fastify destroys the socket, so the chunked body
   * never gets its last chunk and the client's read fails. Rows cut off at a line's end would look
   * like a whole NDJSON file: only that failure tells the client. A feed page is read whole before
   * it is answered, so it is a 503.
   */
  describe('PostgreSQL COPY backend killed mid-stream (pg_terminate_backend)', () => {
    /** About 25 MB of NDJSON: far more than the socket buffers and the export's read-ahead hold. */
    const INCIDENTS = 60_000;
    const FEED_LIMIT = 1000;
    let ctx: FaultContext;
    let rawKey: string;
    let base: string;
    let seeded: Set<string>;

    before(async () => {
      const port = await freePort();
      base = `http://127.0.0.1:${port}`;
      ctx = await createFaultContext('postgres');
      await ctx.app.listen({ port, host: '127.0.0.1' });
      const accountId = await seedAccount(ctx.db, { rate_limit_per_hour: 100_000 });
      ({ rawKey } = await seedKey(ctx.db, accountId));
      const rows = await seedManyIncidents(ctx.databaseUrl, accountId, INCIDENTS, (i) => ({
        description: `${i} ${'x'.repeat(300)}`,
      }));
      seeded = new Set(rows.map((row) => row.id));
    });
    after(() => ctx?.close());

    /** The test's own database: the only one whose sessions are ever ended here. */
    const ownDatabase = () => ownDatabaseName(ctx.databaseUrl);

    /**
     * The sessions of the test's own database running a COPY, or between it and their next
     * statement: `copyOutOf` (src/db/postgres/snapshots.ts) sends `COPY (…) TO STDOUT`, for an export's
     * stream and for each changes-feed page alike.
     */
    const COPYING = `from pg_stat_activity where datname = $1 and query like 'COPY (%'`;

    /** Ends those sessions (with `activeOnly`, only those in the middle of it); says how many. */
    async function terminateCopies(admin: pg.Client, { activeOnly = false } = {}): Promise<number> {
      const { rows } = await admin.query<{ ended: boolean }>(
        `select pg_terminate_backend(pid) as ended ${COPYING} and (not $2 or state = 'active')`,
        [ownDatabase(), activeOnly],
      );
      return rows.filter((row) => row.ended).length;
    }

    /** Once the kills are over: no COPY and no transaction is left open on the database. */
    async function assertNothingLeftOpen(): Promise<void> {
      const open = () =>
        withAdminClient(async (admin) => {
          const { rows } = await admin.query<{ pid: number; state: string; query: string }>(
            `select pid, state, left(query, 40) as query from pg_stat_activity
             where datname = $1 and (query like 'COPY (%' or state like 'idle in transaction%')`,
            [ownDatabase()],
          );
          return rows;
        });
      await until(
        async () => (await open()).length === 0,
        5000,
        async () => `no session left open (left: ${JSON.stringify(await open())})`,
      );
    }

    /** ~20 concurrent ordinary requests, each on the request pool (key check, an incident page). */
    async function assertOrdinaryRequestsAnswered(): Promise<void> {
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          ctx.app.inject({
            method: 'GET',
            url: `/api/v1/public/incidents?limit=50&page=${i + 1}`,
            headers: bearer(rawKey),
          }),
        ),
      );
      assert.deepEqual(
        answers.map((res) => res.statusCode),
        Array(20).fill(200),
      );
    }

    const exportIncidents = () =>
      fetch(`${base}/api/v1/public/exports/incidents.ndjson`, { headers: bearer(rawKey) });

    test('export: its COPY killed mid-stream, 5 times: each response is cut off (the body read fails, no clean end); then a whole export and other requests', async (t) => {
      const name = ownDatabase();
      const cutAfter: number[] = [];
      await withAdminClient(async (admin) => {
        // More rounds than the snapshot pool has connections (4): a connection kept by a killed
        // export would leave a later round waiting for one, then answered 503.
        for (let round = 0; round < 5; round += 1) {
          const res = await exportIncidents();
          assert.equal(res.status, 200, `round ${round}`);
          assert.match(res.headers.get('content-type') ?? '', /^application\/x-ndjson/);
          assert.ok(res.headers.get('x-changes-cursor'), 'with its feed position');
          assert.equal(res.headers.get('content-length'), null, 'streamed, with no length announced');
          assert.ok(res.body !== null);
          const reader = res.body.getReader();
          const received: Uint8Array[] = [];
          const first = await reader.read();
          assert.equal(first.done, false);
          received.push(first.value as Uint8Array);
          // The client reads no further: the buffers between fill up, and PostgreSQL waits to
          // send the next rows of the COPY (ClientWrite). The export is mid-stream.
          await until(
            async () =>
              (await admin.query(`select pid ${COPYING} and wait_event = 'ClientWrite'`, [name])).rowCount ===
              1,
            5000,
            `round ${round}: the COPY waits for the client`,
            20,
          );
          assert.equal(await terminateCopies(admin), 1, `round ${round}: one COPY ended`);

          // The client reads on: what was already on its way, then not the end of the body but an
          // error (the chunked body never gets its last chunk).
          const failure = await (async () => {
            for (;;) {
              const { done, value } = await reader.read();
              if (done) return null;
              received.push(value);
            }
          })().catch((error: unknown) => error);
          const text = Buffer.concat(received).toString('utf8');
          const lines = text.split('\n');
          assert.ok(
            failure instanceof TypeError,
            `round ${round}: the body read fails, instead of ending after ${lines.length - 1} of ${INCIDENTS} rows (${String(failure)})`,
          );
          assert.equal(failure.message, 'terminated', `round ${round}: ${String(failure.cause)}`);
          assert.ok(lines.length - 1 < INCIDENTS, `round ${round}: cut short (${lines.length - 1} lines)`);
          // What came before the cut is the start of the export, row after row.
          assert.ok(lines.length > 2, `round ${round}: some rows came first`);
          for (const line of lines.slice(0, -2)) assert.ok(seeded.has(JSON.parse(line).id));
          cutAfter.push(lines.length - 1);
        }
      });
      t.diagnostic(`rows received before the cut: ${cutAfter.join(', ')} of ${INCIDENTS}`);

      await assertNothingLeftOpen();
      // The server lives on: a whole export beside 20 ordinary requests.
      const [whole] = await Promise.all([
        exportIncidents().then(async (res) => ({ status: res.status, text: await res.text() })),
        assertOrdinaryRequestsAnswered(),
      ]);
      assert.equal(whole.status, 200);
      assert.ok(whole.text.endsWith('\n'));
      const ids = whole.text
        .slice(0, -1)
        .split('\n')
        .map((line) => JSON.parse(line).id as string);
      assert.equal(ids.length, INCIDENTS);
      assert.deepEqual(new Set(ids), seeded);
      await assertOrdinaryRequestsAnswered();
      await assertNothingLeftOpen();
    });

    interface FeedChange {
      seq: number;
      type: string;
      op: string;
      id: string;
      object: { id: string } | null;
    }

    /** Feed pages answered 200 so far: the killer below waits for one after each kill. */
    let pagesServed = 0;

    /** A page of the feed, or `null` for the unavailable answer; anything else fails the test. */
    async function feedPage(
      cursor: string | null,
    ): Promise<{ data: FeedChange[]; next_cursor: string; has_more: boolean } | null> {
      const res = await ctx.app.inject({
        method: 'GET',
        url: `/api/v1/public/changes?limit=${FEED_LIMIT}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`,
        headers: bearer(rawKey),
      });
      if (res.statusCode !== 200) {
        assertUnavailable(res, `changes page: ${res.body.slice(0, 200)}`);
        assert.deepEqual(res.json(), UNAVAILABLE);
        return null;
      }
      assert.match(String(res.headers['content-type']), /^application\/json/);
      const body = JSON.parse(res.body) as { error: unknown; data: Record<string, unknown> };
      assert.equal(body.error, false);
      const { data, next_cursor, has_more } = body.data;
      assert.ok(Array.isArray(data), 'a data array');
      assert.equal(typeof next_cursor, 'string');
      assert.equal(typeof has_more, 'boolean');
      const changes = data as FeedChange[];
      pagesServed += 1;
      if (has_more === true) assert.equal(changes.length, FEED_LIMIT, 'a full page before the end');
      for (const [i, change] of changes.entries()) {
        assert.equal(change.type, 'incident');
        assert.equal(change.op, 'upsert');
        assert.equal(change.object?.id, change.id);
        if (i > 0) assert.ok(change.seq > (changes[i - 1] as FeedChange).seq, 'in seq order');
      }
      return { data: changes, next_cursor: next_cursor as string, has_more: has_more as boolean };
    }

    /** Walks on from `cursor` until `until` says stop or the feed has no more; ids in delivery order. */
    async function walk(
      from: string | null,
      until: (pages: number) => boolean = () => false,
    ): Promise<{ ids: string[]; cursor: string | null; done: boolean; pages: number; unavailable: number }> {
      const ids: string[] = [];
      let cursor = from;
      let pages = 0;
      let unavailable = 0;
      for (let attempt = 0; !until(pages); attempt += 1) {
        assert.ok(attempt < 1000, `the walk goes on (${pages} pages, ${unavailable} unavailable)`);
        const page = await feedPage(cursor);
        if (page === null) {
          // Retried at once from the last good cursor (a real client would wait Retry-After).
          unavailable += 1;
          continue;
        }
        pages += 1;
        ids.push(...page.data.map((change) => change.id));
        cursor = page.next_cursor;
        if (!page.has_more) return { ids, cursor, done: true, pages, unavailable };
      }
      return { ids, cursor, done: false, pages, unavailable };
    }

    const assertEachOnce = (ids: string[], what: string) => {
      assert.equal(ids.length, INCIDENTS, `${what}: ${ids.length} changes delivered`);
      assert.deepEqual(new Set(ids), seeded, `${what}: every incident`);
    };

    test('feed: COPYs of changes pages killed while a client walks it: each answer a whole page or 503 + Retry-After, never 500; the walk then delivers every incident once', async (t) => {
      const pagesInAll = Math.ceil(INCIDENTS / FEED_LIMIT);
      let kills = 0;
      let killing = true;
      const killer = withAdminClient(async (admin) => {
        while (killing) {
          // Only a COPY under way: the page's rows are on their way when its connection dies.
          const ended = await terminateCopies(admin, { activeOnly: true });
          kills += ended;
          // After a kill, a page goes through, however long a page takes on this machine: the
          // walk moves on under fire (a fixed pause let no page through once pages took 50 ms).
          const served = pagesServed;
          while (ended > 0 && killing && pagesServed === served) await sleep(5);
          await sleep(1);
        }
      });
      let underFire: Awaited<ReturnType<typeof walk>>;
      try {
        // At least half the walk and a few kills, leaving a few pages for after.
        underFire = await walk(
          null,
          (pages) => (pages >= pagesInAll / 2 && kills >= 3) || pages >= pagesInAll - 5,
        );
      } finally {
        killing = false;
        await killer;
      }
      assert.equal(underFire.done, false);
      assert.ok(kills >= 3, `${kills} COPYs ended while the walk went on`);
      // Each kill failed the one page whose COPY it ended, as a 503, and nothing more.
      assert.equal(
        underFire.unavailable,
        kills,
        `${kills} COPYs ended, ${underFire.unavailable} answers 503`,
      );
      t.diagnostic(`${kills} COPYs ended in ${underFire.pages + kills} pages asked for`);

      // The kills are over: from the last good cursor, the walk completes.
      const rest = await walk(underFire.cursor);
      assert.ok(rest.done);
      assert.equal(rest.unavailable, 0);
      assertEachOnce([...underFire.ids, ...rest.ids], 'the walk under fire, continued');
      // And from the start again.
      const again = await walk(null);
      assert.ok(again.done);
      assertEachOnce(again.ids, 'a walk from the start');

      await assertNothingLeftOpen();
      await assertOrdinaryRequestsAnswered();
    });
  });
}
