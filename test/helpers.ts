import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import pg from 'pg';
import type { DestinationStream } from 'pino';
import { buildApp } from '../src/app.ts';
import { type Config, loadConfig } from '../src/config.ts';
import { type DatabaseHandle, openDatabase, type StoreName } from '../src/db/database.ts';
import { accountRepository } from '../src/db/repositories/accounts.ts';
import { type IncidentInput, incidentRepository } from '../src/db/repositories/incidents.ts';
import type { Database } from '../src/db/schema.ts';
import { apiKeyService } from '../src/services/api-key-service.ts';
import { openRuntime, type Runtime } from '../src/runtime.ts';

/**
 * Test support. Every store-dependent test runs once per store in `STORES`; each gets a database
 * of its own (a temporary SQLite file, or a fresh PostgreSQL database dropped afterwards), so
 * test files and concurrent runs never share state.
 */

export const ADMIN_PG_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
export const STORES: StoreName[] = (process.env.TEST_STORES ?? 'sqlite,postgres').split(',') as StoreName[];
export const ROOT = new URL('..', import.meta.url).pathname;

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

/**
 * A database of its own. `migrated`: already at the latest schema, copied from the run's template
 * when `npm test` made one (scripts/test-templates.mjs), else left for the caller to migrate.
 */
export async function createTestDatabase(store: StoreName, { migrated = false } = {}): Promise<TestDatabase> {
  const template = migrated ? process.env[`TEST_TEMPLATE_${store.toUpperCase()}`] : undefined;
  if (store === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'safety-api-test-'));
    const path = join(dir, 'test.db');
    if (template !== undefined) copyFileSync(template, path);
    return {
      url: `sqlite:${path}`,
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const name = `safety_test_${process.pid}_${randomUUID().slice(0, 8)}`;
  const admin = new pg.Client({ connectionString: ADMIN_PG_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}${template === undefined ? '' : ` TEMPLATE ${template}`}`);
  await admin.end();
  const url = new URL(ADMIN_PG_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: ADMIN_PG_URL });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}

export interface TestContext {
  app: FastifyInstance;
  db: Kysely<Database>;
  runtime: Runtime;
  config: Config;
  databaseUrl: string;
  /**
   * The database as a command opens it (`openDatabase`: none of the server's deadlines), for a
   * command's work run in-process (an import): a busy machine may take longer than those allow.
   */
  readonly commandLineDb: Kysely<Database>;
  close(): Promise<void>;
}

/** What the runtime of a test's application says (the stores going away and coming back). */
export type RuntimeLogger = Parameters<typeof openRuntime>[1];
const SILENT_RUNTIME: RuntimeLogger = { warn: () => {}, error: () => {} };

/**
 * A migrated database and the whole application on it, ready for `app.inject`. `logStream`
 * receives the log lines (with `LOG_LEVEL` set in `env`), `runtimeLogger` what the runtime says;
 * `route` gives the URL the server reaches its database by (a fault test's relay), from the
 * database's own (`databaseUrl` stays the latter).
 */
export async function createTestContext(
  store: StoreName,
  env: Record<string, string> = {},
  {
    logStream,
    runtimeLogger = SILENT_RUNTIME,
    route = async (url) => url,
  }: {
    logStream?: DestinationStream;
    runtimeLogger?: RuntimeLogger;
    route?: (databaseUrl: string) => Promise<string>;
  } = {},
): Promise<TestContext> {
  const database = await createTestDatabase(store, { migrated: true });
  const config = loadConfig({ LOG_LEVEL: 'silent', ...env, DATABASE_URL: await route(database.url) });
  const runtime = await openRuntime(config, runtimeLogger);
  const app = await buildApp(config, runtime, { logStream });
  await app.ready();
  let commandLine: DatabaseHandle | undefined;
  return {
    app,
    db: runtime.database.db,
    runtime,
    config,
    databaseUrl: database.url,
    get commandLineDb() {
      commandLine ??= openDatabase(database.url);
      return commandLine.db;
    },
    async close() {
      await app.close();
      await runtime.close();
      await commandLine?.destroy();
      await database.drop();
    },
  };
}

/**
 * Another server instance on `ctx`'s database and Redis, as a second machine behind a load
 * balancer would be: its own pools, caches and Redis connection. Closing it leaves the database.
 * `overrides` change its configuration (another way to the same Redis, a log level), and
 * `logStream` receives its log lines.
 */
export async function createSecondInstance(
  ctx: TestContext,
  overrides: Partial<Config> = {},
  { logStream }: { logStream?: DestinationStream } = {},
): Promise<Pick<TestContext, 'app' | 'runtime' | 'close'>> {
  const config = { ...ctx.config, ...overrides };
  const runtime = await openRuntime(config, SILENT_RUNTIME);
  const app = await buildApp(config, runtime, { logStream });
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

const NOW = '2026-01-01T00:00:00.000Z';

export async function seedAccount(
  db: Kysely<Database>,
  overrides: Partial<{ id: string; name: string; api_access: number; rate_limit_per_hour: number }> = {},
): Promise<string> {
  const id = overrides.id ?? randomUUID();
  await db
    .insertInto('accounts')
    .values({
      id,
      name: overrides.name ?? `Account ${id.slice(0, 8)}`,
      api_access: overrides.api_access ?? 1,
      rate_limit_per_hour: overrides.rate_limit_per_hour ?? 1000,
      created_at: NOW,
      updated_at: NOW,
    })
    .execute();
  return id;
}

/** Creates a key through the same service the CLI and admin panel use; returns id and raw key. */
export async function seedKey(
  db: Kysely<Database>,
  accountId: string,
  options: { scope?: string; expiresAt?: string; name?: string } = {},
): Promise<{ id: string; rawKey: string }> {
  const { key, rawKey } = await apiKeyService.create(db, {
    accountId,
    name: options.name ?? 'test key',
    scope: options.scope,
    expiresAt: options.expiresAt ?? null,
    actor: 'test',
  });
  return { id: key.id, rawKey };
}

/**
 * Inserts `count` incidents one minute apart from 2025-01-01 (oldest first), re-derives the paging
 * order and records the account's count, as an import does. `fields` overrides the columns of the
 * i-th incident; by default it is `INC-2025-<i+1>`, open, likelihood 2 and impact 3 (score 6).
 */
export async function seedIncidents(
  db: Kysely<Database>,
  accountId: string,
  count: number,
  fields: (i: number) => Partial<IncidentInput> = () => ({}),
): Promise<IncidentInput[]> {
  const start = Date.UTC(2025, 0, 1);
  const rows = Array.from({ length: count }, (_, i) => ({
    id: randomUUID(),
    account_id: accountId,
    incident_number: `INC-2025-${i + 1}`,
    description: null,
    status: 'open',
    severity_likelihood: 2,
    severity_impact: 3,
    location: null,
    incident_date: null,
    created_at: new Date(start + i * 60_000).toISOString(),
    updated_at: new Date(start + i * 60_000).toISOString(),
    ...fields(i),
  }));
  // Numbered in the changes feed after the account's last change, as an import numbers them.
  const head = (await accountRepository.lockForChanges(db, accountId)) ?? 0;
  const changedAt = new Date().toISOString();
  const stamped = rows.map((row, i) => ({
    ...row,
    change_seq: head + i + 1,
    changed_at: changedAt,
    created_seq: head + i + 1,
  }));
  for (let i = 0; i < stamped.length; i += 200)
    await incidentRepository.upsertMany(db, stamped.slice(i, i + 200));
  await incidentRepository.rerank(db, accountId, null);
  await accountRepository.recordChanges(db, accountId, {
    lastSeq: head + rows.length,
    incidentCount: await incidentRepository.countForAccount(db, accountId),
    purgedSeq: 0,
  });
  return rows;
}

/**
 * `seedIncidents` for thousands of incidents, through a handle of its own as the CLI opens it
 * (`openDatabase`): the server's handle gives each statement 2 s, and ranking tens of thousands of
 * rows can take longer than that on a slow machine, before the test has begun.
 */
export async function seedManyIncidents(
  databaseUrl: string,
  accountId: string,
  count: number,
  fields?: (i: number) => Partial<IncidentInput>,
): Promise<IncidentInput[]> {
  const seeder = openDatabase(databaseUrl);
  try {
    return await seedIncidents(seeder.db, accountId, count, fields);
  } finally {
    await seeder.destroy();
  }
}

/** A deterministic source of numbers in [0, 1), so a randomized test's failure can be replayed. */
export function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

/** A log destination that keeps every line, parsed, for a test to read. */
export function captureLog(): {
  stream: DestinationStream;
  lines: Record<string, unknown>[];
  text(): string;
} {
  const lines: Record<string, unknown>[] = [];
  const raw: string[] = [];
  return {
    stream: {
      write(line: string) {
        raw.push(line);
        lines.push(JSON.parse(line) as Record<string, unknown>);
      },
    },
    lines,
    text: () => raw.join(''),
  };
}

export function bearer(rawKey: string): { authorization: string } {
  return { authorization: `Bearer ${rawKey}` };
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** The exit code and whole output of `child` (whose standard streams are pipes), once it closes. */
export function outputOf(child: ChildProcessWithoutNullStreams): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

/** Runs `node ARGS` in `cwd` with `stdin`, LOG_LEVEL silent unless `env` says otherwise. */
export function runNode(
  args: string[],
  { cwd = ROOT, env = {}, stdin = '' }: { cwd?: string; env?: Record<string, string>; stdin?: string } = {},
): Promise<CliResult> {
  const child = spawn(process.execPath, args, { cwd, env: { ...process.env, LOG_LEVEL: 'silent', ...env } });
  const output = outputOf(child);
  child.stdin.end(stdin);
  return output;
}

/** Runs the real `safety-api` executable in a child process. */
export function runCli(args: string[], env: Record<string, string>, stdin = ''): Promise<CliResult> {
  return runNode([join(ROOT, 'bin/safety-api.js'), ...args], { env, stdin });
}

export interface ServerProcess {
  url: string;
  port: number;
  logs: () => string;
  /** Sends a signal without waiting. */
  signal(name: NodeJS.Signals): void;
  /** Resolves with the exit code and the time from the call; kills the process past `withinMs`. */
  exited(withinMs: number): Promise<{ code: number | null; ms: number }>;
  stop(): Promise<number | null>;
}

/** Starts the real `safety-api serve` on a free port and waits until it listens. */
export async function startServer(env: Record<string, string>): Promise<ServerProcess> {
  const child: ChildProcessWithoutNullStreams = spawn(
    process.execPath,
    [join(ROOT, 'bin/safety-api.js'), 'serve'],
    {
      cwd: ROOT,
      env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    },
  );
  let output = '';
  child.stdout.on('data', (d) => {
    output += d;
  });
  child.stderr.on('data', (d) => {
    output += d;
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), 60_000);
    const check = () => {
      const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1] as string);
      }
    };
    child.stdout.on('data', check);
    child.on('exit', () => reject(new Error(`server exited:\n${output}`)));
  });
  return {
    url,
    port: Number(new URL(url).port),
    logs: () => output,
    signal: (name) => child.kill(name),
    async exited(withinMs) {
      const started = performance.now();
      if (child.exitCode !== null || child.signalCode !== null)
        return { code: child.exitCode, ms: performance.now() - started };
      const timer = setTimeout(() => child.kill('SIGKILL'), withinMs);
      const [code] = await once(child, 'exit');
      clearTimeout(timer);
      return { code: code as number | null, ms: performance.now() - started };
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      const [code] = await once(child, 'exit');
      return code as number | null;
    },
  };
}
