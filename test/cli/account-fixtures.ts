import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { type Kysely, SqliteAdapter, sql } from 'kysely';
import * as oidc from 'openid-client';
import { mailNoticeRepository } from '../../src/db/repositories/mail-notices.ts';
import { webhookRepository } from '../../src/db/repositories/webhooks.ts';
import type { Database } from '../../src/db/schema.ts';
import { apiKeyService } from '../../src/services/api-key-service.ts';
import { bearer, runCli, seedKey } from '../helpers.ts';
import {
  authorizationRequest,
  Browser,
  discover,
  type OauthServer,
  PASSWORD,
  seedClient,
  seedUser as seedOauthUser,
  signInAndConsent,
} from '../oauth/harness.ts';
import { AdminClient, seedUser as seedAdmin } from '../routes/admin/admin-helpers.ts';

/**
 * An account with something in every table an account's data reaches, made the way the product
 * makes it (imports by the CLI, keys by the key service, a sign-in to the admin panel, a partner
 * app's authorization through the real OAuth pages), for the tests of `accounts export` and
 * `accounts delete`; and a reader of every row of every table the database catalog lists.
 */

export interface PopulatedAccount {
  accountId: string;
  /** A working key of the account (read scope). */
  rawKey: string;
  /** The live incidents' ids in paging order, oldest first. */
  incidentIds: string[];
  /** Values that must never leave the store: raw keys, key hashes, secrets, tokens, password hashes. */
  secrets: string[];
  /** An OAuth access token of a user of the account, for the wider API. */
  accessToken: string;
}

const SCOPE = 'openid profile email employment users:read incidents:read';

/** Writes `records` as an NDJSON file and imports it with the real CLI. */
export async function importRecords(records: object[], env: Record<string, string>): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'account-fixture-'));
  try {
    const file = join(dir, 'records.ndjson');
    writeFileSync(file, records.map((record) => JSON.stringify(record)).join('\n'));
    const result = await runCli(['import', file], env);
    assert.equal(result.code, 0, result.stderr);
    return result.stdout;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The account's records: departments, locations and users, some out of the public view, and incidents. */
export function accountRecords(accountId: string, incidents: number): Record<string, unknown>[] {
  const tag = accountId.slice(0, 8);
  const named = (type: string, names: [string, boolean][]) =>
    names.map(([name, active], i) => ({
      type,
      id: randomUUID(),
      account_id: accountId,
      name,
      active,
      created_at: new Date(Date.UTC(2024, 0, 1 + i)).toISOString(),
    }));
  return [
    {
      type: 'account',
      id: accountId,
      name: `Account ${tag}`,
      api_access: true,
      rate_limit_per_hour: 1_000_000,
    },
    ...named('department', [
      ['Operations', true],
      ['élan Maintenance', true],
      ['Closed Site', false],
    ]),
    ...named('location', [
      ['Dock 4', true],
      ['Warehouse "B"', true],
      ['Old Yard', false],
    ]),
    ...[
      { name: 'Zoë Adams', role: 'manager', active: true, vendor_support: false },
      { name: 'bob Brown', role: 'employee', active: true, vendor_support: false },
      { name: 'Gone Person', role: 'employee', active: false, vendor_support: false },
      { name: 'Vendor Help', role: 'admin', active: true, vendor_support: true },
    ].map((user, i) => ({
      type: 'user',
      id: randomUUID(),
      account_id: accountId,
      email: `person${i}-${tag}@example.com`,
      department: i === 0 ? 'Operations' : null,
      job_title: i === 1 ? 'Forklift driver' : null,
      created_at: new Date(Date.UTC(2024, 1, 1 + i)).toISOString(),
      ...user,
    })),
    ...Array.from({ length: incidents }, (_, i) => ({
      type: 'incident',
      id: randomUUID(),
      account_id: accountId,
      incident_number: `INC-2025-${String(i + 1).padStart(4, '0')}`,
      description: i % 3 === 0 ? null : `Slip near bay ${i} — "wet floor" ✓`,
      status: i % 4 === 0 ? 'closed' : 'open',
      severity_likelihood: i % 5 === 0 ? null : (i % 5) + 1,
      severity_impact: (i % 3) + 1,
      location: i % 2 === 0 ? 'Dock 4' : null,
      incident_date: i % 2 === 0 ? '2025-03-01' : null,
      // Some share a creation time: the order falls back to the id.
      created_at: new Date(Date.UTC(2025, 0, 1) + Math.floor(i / 2) * 60_000).toISOString(),
      updated_at: new Date(Date.UTC(2025, 5, 1) + i * 1000).toISOString(),
    })),
  ];
}

/**
 * Fills an account: records imported by the CLI (then one incident deleted, which leaves a
 * tombstone and a holed block), a super admin signed in to the panel, keys (one revoked) with
 * usage and last use recorded, a webhook endpoint with delivery attempts, acknowledged
 * records and a mail notice, and an OAuth client a user authorized through the real pages, plus an authorization
 * left half-way (an interaction that names its client only in its payload).
 */
export async function populateAccount(
  server: OauthServer,
  env: Record<string, string>,
  { incidents = 20 }: { incidents?: number } = {},
): Promise<PopulatedAccount> {
  const { db, app, runtime } = server.ctx;
  const accountId = randomUUID();
  const records = accountRecords(accountId, incidents);
  await importRecords(records, env);
  const incidentRecords = records.filter((r) => r.type === 'incident');
  const deleted = incidentRecords[1] as { id: string };
  await importRecords([{ type: 'incident', id: deleted.id, account_id: accountId, deleted: true }], env);
  const incidentIds = incidentRecords
    .map((r) => ({ created_at: r.created_at as string, id: r.id as string }))
    .filter((r) => r.id !== deleted.id)
    // Paging order: by creation time, then id.
    .sort((a, b) =>
      a.created_at === b.created_at ? (a.id < b.id ? -1 : 1) : a.created_at < b.created_at ? -1 : 1,
    )
    .map((r) => r.id);

  const admin = await seedAdmin(db, accountId);
  const panel = new AdminClient(app);
  assert.equal((await panel.signIn(admin.email)).statusCode, 303, 'signed in to the panel');

  const key = await seedKey(db, accountId, { name: 'BI export' });
  const revoked = await seedKey(db, accountId, { name: 'old' });
  await apiKeyService.revoke(db, revoked.id, 'test');
  for (const rawKey of [key.rawKey, revoked.rawKey]) {
    await app.inject({ url: '/api/v1/public/incidents', headers: bearer(rawKey) });
  }
  await runtime.lastUse.flush();
  await runtime.keyUsage.flush();

  const { endpoint, secret } = await runtime.services.webhooks.create({
    accountId,
    url: 'http://127.0.0.1:9/hook',
    actor: 'test',
  });
  await webhookRepository.recordAttempts(db, [
    {
      endpoint_id: endpoint.id,
      webhook_id: `msg_${randomUUID()}`,
      type: 'incident.created',
      seq: 1,
      at: new Date().toISOString(),
      status: 204,
      duration_ms: 3,
      error: null,
      // What the delivery log keeps of the request and the answer: erased with the account too.
      request_headers: JSON.stringify({
        'webhook-id': 'msg_fixture',
        'webhook-signature': 'v1,c2lnbmF0dXJl',
      }),
      request_body: JSON.stringify({
        type: 'incident.created',
        data: { id: incidentIds[0], account: accountId },
      }),
      response_headers: JSON.stringify({ 'x-receiver': 'fixture' }),
      response_body: 'accepted',
      outcome: 'success',
    },
  ]);
  await webhookRepository.acknowledge(db, endpoint.id, [
    { record_type: 'incident', record_id: incidentIds[0] as string, created_seq: 1 },
  ]);
  // A mail told of the endpoint's failure, as the mail service claims it before sending.
  await mailNoticeRepository.claim(db, {
    key: `webhook-failing:${endpoint.id}:2026-01-01T00:00:00.000Z`,
    account_id: accountId,
    created_at: new Date().toISOString(),
  });

  const client = await seedClient(db, accountId);
  const user = await seedOauthUser(db, accountId, { role: 'admin' });
  const config = await discover(server, client.clientId, client.clientSecret);
  const state = oidc.randomState();
  const { url, verifier } = await authorizationRequest(config, { scope: SCOPE, state });
  const callback = await signInAndConsent(new Browser(server.baseUrl), url, {
    email: user.email,
    password: PASSWORD,
  });
  const tokens = await oidc.authorizationCodeGrant(config, callback, {
    pkceCodeVerifier: verifier,
    expectedState: state,
  });
  // An authorization under way: nobody has signed in yet.
  const halfway = await authorizationRequest(config, { scope: SCOPE });
  assert.equal((await new Browser(server.baseUrl).follow(halfway.url.href)).response.status, 200);

  const hashes = await db
    .selectFrom('api_keys')
    .select('key_hash')
    .where('account_id', '=', accountId)
    .execute();
  const passwords = await db
    .selectFrom('users')
    .select('password_hash')
    .where('account_id', '=', accountId)
    .where('password_hash', 'is not', null)
    .execute();
  return {
    accountId,
    rawKey: key.rawKey,
    incidentIds,
    accessToken: tokens.access_token,
    secrets: [
      key.rawKey,
      revoked.rawKey,
      secret,
      secret.slice('whsec_'.length),
      client.clientSecret as string,
      tokens.access_token,
      tokens.refresh_token as string,
      ...hashes.map((row) => row.key_hash),
      ...passwords.map((row) => row.password_hash as string),
    ],
  };
}

/** Every table of the database, from its catalog (not from a list kept by the tests). */
export async function catalogTables(db: Kysely<Database>): Promise<string[]> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) {
    const { rows } = await sql<{
      name: string;
    }>`select name from sqlite_master where type = 'table' and name not like 'sqlite_%' order by name`.execute(
      db,
    );
    return rows.map((row) => row.name);
  }
  const { rows } = await sql<{ name: string }>`
    select table_name as name from information_schema.tables
    where table_schema = current_schema() and table_type = 'BASE TABLE' order by table_name`.execute(db);
  return rows.map((row) => row.name);
}

/** The column names of `table`, from the database catalog. */
export async function catalogColumns(db: Kysely<Database>, table: string): Promise<string[]> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) {
    const { rows } = await sql<{ name: string }>`select name from pragma_table_info(${table})`.execute(db);
    return rows.map((row) => row.name);
  }
  const { rows } = await sql<{ name: string }>`
    select column_name as name from information_schema.columns
    where table_schema = current_schema() and table_name = ${table}`.execute(db);
  return rows.map((row) => row.name);
}

/** Every row of every table, as JSON text per table. */
export async function everyRow(db: Kysely<Database>): Promise<Map<string, string[]>> {
  const tables = new Map<string, string[]>();
  for (const table of await catalogTables(db)) {
    const { rows } = await sql<Record<string, unknown>>`select * from ${sql.table(table)}`.execute(db);
    tables.set(
      table,
      rows.map((row) =>
        JSON.stringify(row, (_key, value) => (typeof value === 'bigint' ? String(value) : value)),
      ),
    );
  }
  return tables;
}

/**
 * Every id the account owns in the store: its own, and those of its users, departments, locations,
 * incidents (live and deleted), keys, webhook endpoints, OAuth clients and the grants its users gave.
 */
export async function idsOfAccount(db: Kysely<Database>, accountId: string): Promise<string[]> {
  const ids = [accountId];
  for (const table of [
    'users',
    'departments',
    'locations',
    'incidents',
    'incident_tombstones',
    'api_keys',
    'webhook_endpoints',
  ] as const) {
    const rows = await db.selectFrom(table).select('id').where('account_id', '=', accountId).execute();
    ids.push(...rows.map((row) => row.id));
  }
  const clients = await db
    .selectFrom('oauth_clients')
    .select('client_id')
    .where('account_id', '=', accountId)
    .execute();
  ids.push(...clients.map((row) => row.client_id));
  const grants = await db
    .selectFrom('oauth_payloads')
    .select('id')
    .where('model', '=', 'Grant')
    .where(
      'client_id',
      'in',
      clients.map((row) => row.client_id),
    )
    .execute();
  ids.push(...grants.map((row) => row.id));
  return ids;
}

/** Per table, the rows that mention any of `ids`. */
export function rowsMentioning(tables: Map<string, string[]>, ids: readonly string[]): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const [table, rows] of tables) {
    const mentioning = rows.filter((row) => ids.some((id) => row.includes(id)));
    if (mentioning.length > 0) found.set(table, mentioning);
  }
  return found;
}

/** A public GET with `rawKey`: status and parsed body. */
export async function publicGet(
  app: FastifyInstance,
  rawKey: string,
  url: string,
): Promise<{ status: number; body: unknown }> {
  const res = await app.inject({ url, headers: bearer(rawKey) });
  const type = String(res.headers['content-type'] ?? '');
  const body = type.includes('csv')
    ? res.body
    : type.includes('ndjson')
      ? res.body
          .split('\n')
          .filter((line) => line !== '')
          .map((line) => JSON.parse(line))
      : res.body === ''
        ? null
        : JSON.parse(res.body);
  return { status: res.statusCode, body };
}
