import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import { bearer, runCli, seedAccount, seedIncidents, seedKey } from '../helpers.ts';
import { until } from '../wait.ts';

/**
 * The exactness rule on two instances of one store: a revocation, disabling, scope or plan change
 * or import made by the real CLI applies at the very next request of every instance, also under
 * load. One table of cases, run by each store's test file on its own two instances: PostgreSQL
 * with Redis (the shared generation) and SQLite (the commit watch).
 */

export const PAGE_ONE = '/api/v1/public/incidents';

export const pageOne = (
  app: FastifyInstance,
  rawKey: string,
  method: 'GET' | 'POST' = 'GET',
  headers: Record<string, string> = {},
) => app.inject({ method, url: PAGE_ONE, headers: { ...bearer(rawKey), ...headers } });

export interface Answer {
  status: number;
  headers: Headers;
  body: string;
}

/** One server instance, as its clients reach it. */
export interface Instance {
  pageOne(
    rawKey: string,
    options?: { method?: 'GET' | 'POST'; headers?: Record<string, string> },
  ): Promise<Answer>;
}

/** An application in this process, asked through `app.inject`. */
export function inProcess(app: FastifyInstance): Instance {
  return {
    async pageOne(rawKey, { method, headers } = {}) {
      const res = await pageOne(app, rawKey, method, headers);
      const entries = Object.entries(res.headers).flatMap(([name, value]) =>
        value === undefined ? [] : [[name, String(value)] as [string, string]],
      );
      return { status: res.statusCode, headers: new Headers(entries), body: res.body };
    },
  };
}

/** A server process listening at `baseUrl`, asked over HTTP. */
export function overHttp(baseUrl: string): Instance {
  return {
    async pageOne(rawKey, { method = 'GET', headers = {} } = {}) {
      const res = await fetch(`${baseUrl}${PAGE_ONE}`, {
        method,
        headers: { ...bearer(rawKey), ...headers },
      });
      return { status: res.status, headers: res.headers, body: await res.text() };
    },
  };
}

export interface TwoInstances {
  instances: readonly Instance[];
  /** A connection of the test's own to the database both instances use, for seeding. */
  db: Kysely<Database>;
  /** What the CLI needs to reach the same database (and Redis) as the instances. */
  cliEnv: Record<string, string>;
}

/** Registers the cases in the calling `describe`; `cluster` is called once its `before` has run. */
export function exactnessOnTwoInstances(cluster: () => TwoInstances): void {
  async function cli(...args: string[]): Promise<void> {
    const result = await runCli(args, cluster().cliEnv);
    assert.equal(result.code, 0, result.stderr);
  }

  async function importRecords(records: Record<string, unknown>[]): Promise<void> {
    const dir = mkdtempSync(join(tmpdir(), 'two-instances-'));
    try {
      const file = join(dir, 'records.ndjson');
      writeFileSync(file, records.map((record) => JSON.stringify(record)).join('\n'));
      await cli('import', file);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  test('every kind of write by the CLI applies at the next request of both instances', async () => {
    const { db, instances } = cluster();
    const accountId = await seedAccount(db);
    await seedIncidents(db, accountId, 3);
    const key = await seedKey(db, accountId);
    const expectAll = async (check: (instance: Instance) => Promise<void>) => {
      for (const instance of instances) await check(instance);
    };
    const status = (expected: number) => async (instance: Instance) =>
      assert.equal((await instance.pageOne(key.rawKey)).status, expected);
    const error =
      (code: string, method: 'GET' | 'POST' = 'GET') =>
      async (instance: Instance) =>
        assert.equal(JSON.parse((await instance.pageOne(key.rawKey, { method })).body).error, code);

    await expectAll(status(200));
    await cli('keys', 'disable', key.id);
    await expectAll(error('API_KEY_INVALID'));
    await cli('keys', 'enable', key.id);
    await expectAll(status(200));

    await expectAll(error('INSUFFICIENT_SCOPE', 'POST'));
    await cli('keys', 'scope', key.id, 'read-write');
    await expectAll(async (instance) =>
      assert.equal((await instance.pageOne(key.rawKey, { method: 'POST' })).status, 405),
    );

    // Each instance serves page 1 from its cached body: a request naming its ETag gets a 304.
    const before = new Map<Instance, string>();
    await expectAll(async (instance) => {
      const res = await instance.pageOne(key.rawKey);
      assert.equal(JSON.parse(res.body).data.pagination.total, 3);
      const etag = res.headers.get('etag');
      assert.ok(etag !== null);
      before.set(instance, etag);
      assert.equal((await instance.pageOne(key.rawKey, { headers: { 'if-none-match': etag } })).status, 304);
    });
    const incident = {
      type: 'incident',
      id: randomUUID(),
      account_id: accountId,
      incident_number: 'INC-2099-0001',
      status: 'open',
      created_at: '2099-01-01T00:00:00.000Z',
      updated_at: '2099-01-01T00:00:00.000Z',
    };
    await importRecords([incident]);
    // The next request gets the new body, under a new ETag, even when it names the old one.
    await expectAll(async (instance) => {
      const res = await instance.pageOne(key.rawKey, { headers: { 'if-none-match': before.get(instance)! } });
      assert.equal(res.status, 200);
      const { data } = JSON.parse(res.body);
      assert.equal(data.pagination.total, 4);
      assert.equal(data.data[0].id, incident.id, 'the new incident, the newest, leads page 1');
      assert.notEqual(res.headers.get('etag'), before.get(instance));
    });

    await importRecords([{ type: 'account', id: accountId, name: 'Plan removed', api_access: false }]);
    await expectAll(error('FEATURE_NOT_AVAILABLE'));
    await importRecords([{ type: 'account', id: accountId, name: 'Plan back', api_access: true }]);
    await expectAll(status(200));

    await cli('keys', 'revoke', key.id);
    await expectAll(error('API_KEY_INVALID'));
  });

  test('under load on both instances, no 200 is served after a revocation has returned', async () => {
    const { db, instances } = cluster();
    // An allowance the load cannot use up: a 429 must not stand in for the revocation's 401.
    const accountId = await seedAccount(db, { rate_limit_per_hour: 10_000_000 });
    await seedIncidents(db, accountId, 10);
    const key = await seedKey(db, accountId);
    let revokedAt: number | null = null;
    let servedBefore = 0;
    let servedAfter = 0;
    const refusedAfter: string[] = [];
    // Each client sends one request after another; only those sent after the command returned
    // count, and the load stops at 200 of them, whatever they were answered.
    const load = async (instance: Instance) => {
      while (servedAfter + refusedAfter.length < 200) {
        const sentAt = Date.now();
        const res = await instance.pageOne(key.rawKey);
        if (revokedAt === null || sentAt <= revokedAt) {
          if (res.status === 200) servedBefore += 1;
        } else if (res.status === 200) servedAfter += 1;
        else refusedAfter.push(`${res.status} ${JSON.parse(res.body).error}`);
      }
    };
    const clients = instances.flatMap((instance) => Array.from({ length: 8 }, () => load(instance)));
    // The load is under way (each client answered a few times) before the key is revoked.
    await until(() => servedBefore >= 3 * 8 * instances.length, 30_000, 'the load to be under way');
    await cli('keys', 'revoke', key.id);
    revokedAt = Date.now();
    await Promise.all(clients);
    assert.ok(servedBefore > 0, 'the instances were serving the key until the revocation');
    assert.equal(servedAfter, 0);
    assert.deepEqual(new Set(refusedAfter), new Set(['401 API_KEY_INVALID']));
  });
}
