import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { apiKeyService } from '../../src/services/api-key-service.ts';
import { openRuntime, type Runtime } from '../../src/runtime.ts';
import { bearer, seedAccount, seedKey, type TestContext } from '../helpers.ts';
import { importRecords, incident } from '../webhooks/feed.ts';

/**
 * A populated store for the copy, backup and restore tests, what its API answers, and the same
 * application opened on another store to compare with.
 */

export interface Populated {
  /** Accounts nothing writes to after `populate`. */
  steady: string[];
  /** The account imports go on writing to (`importWhile`). */
  busy: string;
  /** Raw keys by the state they are in; `rolledOld` and `rolledNew` are both in a roll's overlap. */
  keys: Record<
    'active' | 'disabled' | 'revoked' | 'expired' | 'rolledOld' | 'rolledNew' | 'other' | 'busy',
    string
  >;
  /** A /changes cursor from the middle of the steady account's feed, saved before its deletions. */
  savedCursor: string;
}

const department = (accountId: string, id: string, name: string, active = true) => ({
  type: 'department',
  id,
  account_id: accountId,
  name,
  active,
});

/**
 * Two steady accounts (one with departments, locations, users in every flag, incidents, updates and
 * deletions after a saved cursor, and keys in every state) and a busy one.
 */
export async function populate(ctx: TestContext): Promise<Populated> {
  const a = await seedAccount(ctx.db, { name: 'Northwind' });
  const b = await seedAccount(ctx.db, { name: 'Contoso', rate_limit_per_hour: 5000 });
  const busy = await seedAccount(ctx.db, { name: 'Busy' });
  const ids = Array.from({ length: 130 }, () => randomUUID());
  await importRecords(ctx, [
    department(a, randomUUID(), 'Operations'),
    department(a, randomUUID(), 'Retired', false),
    { type: 'location', id: randomUUID(), account_id: a, name: 'Plant 1', active: true },
    ...['employee', 'manager', 'admin'].map((role, i) => ({
      type: 'user',
      id: randomUUID(),
      account_id: a,
      name: `Person ${i} «ü» \t"quoted"\\`,
      email: `person${i}-${a}@example.com`,
      role,
      department: 'Operations',
      job_title: i === 0 ? null : 'Lead\nline two',
      active: i !== 2,
      vendor_support: false,
    })),
    ...ids.map((id, i) =>
      incident(a, id, i + 1, {
        description: i % 3 === 0 ? null : `Spill ${i}: "oil" \\ tab\there, ünïcödé 🚧`,
        severity_likelihood: (i % 5) + 1,
        severity_impact: (i % 4) + 1,
      }),
    ),
    ...Array.from({ length: 30 }, (_, i) => incident(b, randomUUID(), i + 1)),
  ]);
  const key = await seedKey(ctx.db, a);
  const first = await ctx.app.inject({
    url: '/api/v1/public/changes?limit=60',
    headers: bearer(key.rawKey),
  });
  assert.equal(first.statusCode, 200, first.body);
  const savedCursor = first.json().data.next_cursor as string;
  // After the saved cursor: deletions, an update, and a record leaving the view.
  await importRecords(ctx, [
    ...ids.slice(0, 10).map((id) => ({ type: 'incident', id, account_id: a, deleted: true })),
    incident(a, ids[20] as string, 21, { status: 'closed' }),
    department(a, randomUUID(), 'Late arrival'),
  ]);

  const disabled = await seedKey(ctx.db, a, { name: 'disabled' });
  await apiKeyService.disable(ctx.db, disabled.id, 'test');
  const revoked = await seedKey(ctx.db, a, { name: 'revoked' });
  await apiKeyService.revoke(ctx.db, revoked.id, 'test');
  const expired = await seedKey(ctx.db, a, { name: 'expired' });
  await ctx.db
    .updateTable('api_keys')
    .set({ expires_at: '2020-01-01T00:00:00.000Z' })
    .where('id', '=', expired.id)
    .execute();
  const rolled = await seedKey(ctx.db, a, { name: 'rolled' });
  const roll = await apiKeyService.roll(ctx.db, rolled.id, '24h', 'test');
  const other = await seedKey(ctx.db, b);
  const busyKey = await seedKey(ctx.db, busy);
  return {
    steady: [a, b],
    busy,
    keys: {
      active: key.rawKey,
      disabled: disabled.rawKey,
      revoked: revoked.rawKey,
      expired: expired.rawKey,
      rolledOld: rolled.rawKey,
      rolledNew: roll.rawKey,
      other: other.rawKey,
      busy: busyKey.rawKey,
    },
    savedCursor,
  };
}

export interface Answer {
  status: number;
  etag: string | undefined;
  body: string;
}

/** Requests whose answers a copy must keep: every page of the steady accounts, by each key. */
export function requestsOf(populated: Populated): { url: string; key: string }[] {
  const { keys } = populated;
  const requests: { url: string; key: string }[] = [];
  for (const page of [1, 2, 3, 4])
    requests.push({ url: `/api/v1/public/incidents?page=${page}&limit=50`, key: keys.active });
  for (const path of ['users', 'departments', 'locations'])
    requests.push({ url: `/api/v1/public/${path}`, key: keys.active });
  requests.push({
    url: `/api/v1/public/changes?cursor=${encodeURIComponent(populated.savedCursor)}`,
    key: keys.active,
  });
  requests.push({ url: '/api/v1/public/changes?limit=1000', key: keys.active });
  requests.push({ url: '/api/v1/public/incidents', key: keys.other });
  for (const state of ['disabled', 'revoked', 'expired', 'rolledOld', 'rolledNew'] as const)
    requests.push({ url: '/api/v1/public/incidents?limit=5', key: keys[state] });
  return requests;
}

/** What `app` answers to each request (status, ETag and body). */
export async function answers(
  app: FastifyInstance,
  requests: { url: string; key: string }[],
): Promise<Answer[]> {
  const result: Answer[] = [];
  for (const { url, key } of requests) {
    const res = await app.inject({ url, headers: bearer(key) });
    result.push({
      status: res.statusCode,
      etag: res.headers.etag as string | undefined,
      body: feedPlace(res.body),
    });
  }
  return result;
}

/**
 * A changes page's `next_cursor` holds the second it was issued at beside its place in the feed
 * (src/services/change-cursor.ts): compared by its place (position and bound), the rest as it is.
 */
function feedPlace(body: string): string {
  return body.replace(/"next_cursor":"([A-Za-z0-9_-]+)"/, (_, cursor: string) => {
    const place = Buffer.from(cursor, 'base64url').subarray(0, 13).toString('hex');
    return `"next_cursor":"place ${place}"`;
  });
}

/** Imports of `size` new incidents into `accountId`, one after another, until `stop()`; each all or nothing. */
export function importWhile(ctx: TestContext, accountId: string, size: number) {
  let going = true;
  let batches = 0;
  let number = 0;
  const loop = (async () => {
    while (going) {
      await importRecords(
        ctx,
        Array.from({ length: size }, () => incident(accountId, randomUUID(), (number += 1))),
      );
      batches += 1;
    }
  })();
  return {
    get batches() {
      return batches;
    },
    async stop(): Promise<number> {
      going = false;
      await loop;
      return batches;
    },
  };
}

export interface OpenedApp {
  app: FastifyInstance;
  runtime: Runtime;
  close(): Promise<void>;
}

/** The whole application on the store at `url` (already populated), as a server there would run. */
export async function appOn(url: string, env: Record<string, string> = {}): Promise<OpenedApp> {
  const config = loadConfig({ LOG_LEVEL: 'silent', ...env, DATABASE_URL: url });
  const runtime = await openRuntime(config, { warn: () => {}, error: () => {} });
  const app = await buildApp(config, runtime);
  await app.ready();
  return {
    app,
    runtime,
    async close() {
      await app.close();
      await runtime.close();
    },
  };
}

/** The incidents of the account of `key` on `app`, by the list's `total`. */
export async function totalOf(app: FastifyInstance, key: string): Promise<number> {
  const res = await app.inject({ url: '/api/v1/public/incidents?limit=1', headers: bearer(key) });
  assert.equal(res.statusCode, 200, res.body);
  return res.json().data.pagination.total as number;
}
