import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import pg from 'pg';
import { DEMO_ACCOUNT_ID, demoRecords, writeNdjson } from '../src/demo/demo-data.ts';

/**
 * `npm run bench`: builds a demo account of BENCH_INCIDENTS incidents (default 1,000,000), imports
 * it with the real CLI, starts the real server and a bare node:http server serving the same bytes,
 * loads both with autocannon (its own process) side by side, and prints one table of results with
 * the target beside each. Everything runs on loopback; every load run is bounded in time.
 */

const ROOT = new URL('..', import.meta.url).pathname;
const CLI = join(ROOT, 'bin/safety-api.js');
const AUTOCANNON = join(ROOT, 'node_modules/autocannon/autocannon.js');
const INCIDENTS = Number(process.env.BENCH_INCIDENTS ?? 1_000_000);
const PG_INCIDENTS = Number(process.env.BENCH_PG_INCIDENTS ?? Math.min(INCIDENTS, 100_000));
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const PG_ADMIN_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const WORK = join(ROOT, '.bench', `run-${process.pid}`);
const PAGE_ONE = '/api/v1/public/incidents?limit=50';

interface Row {
  measurement: string;
  result: string;
  target: string;
  pass: boolean | null;
}
const rows: Row[] = [];
const children: ChildProcess[] = [];

function log(line: string): void {
  process.stderr.write(`[bench] ${line}\n`);
}

/** Runs the CLI to completion; returns stdout, the wall time and the child's peak RSS. */
async function cli(args: string[], env: Record<string, string>) {
  const started = performance.now();
  // GNU time reports the peak resident set of the whole command, on the last line of stderr.
  const child = spawn('/usr/bin/time', ['-f', 'peak-rss-kb %M', process.execPath, CLI, ...args], {
    env: { ...process.env, LOG_LEVEL: 'warn', ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => {
    stdout += d;
  });
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  const [code] = await once(child, 'close');
  if (code !== 0) throw new Error(`safety-api ${args[0]} failed: ${stderr}`);
  const rssKb = Number(/peak-rss-kb (\d+)/.exec(stderr)?.[1] ?? Number.NaN);
  return { stdout, seconds: (performance.now() - started) / 1000, rssMb: rssKb / 1024 };
}

/** Starts a long-running child and waits until `ready()` resolves. */
async function start(args: string[], env: Record<string, string>, ready: () => Promise<boolean>) {
  const child = spawn(process.execPath, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  for (let i = 0; i < 200; i += 1) {
    if (child.exitCode !== null) throw new Error(`${args.join(' ')} exited with ${child.exitCode}`);
    if (await ready().catch(() => false)) return child;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${args.join(' ')} did not start`);
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  child.kill('SIGTERM');
  await once(child, 'exit');
}

const agent = new Agent({ keepAlive: true, maxSockets: 1 });

/** One GET with a kept-alive connection; returns status, headers, body and latency in ms. */
function get(port: number, path: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: Record<string, string>; body: Buffer; ms: number }>(
    (resolve, reject) => {
      const started = performance.now();
      const req = request({ host: '127.0.0.1', port, path, headers, agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers as Record<string, string>,
            body: Buffer.concat(chunks),
            ms: performance.now() - started,
          }),
        );
      });
      req.on('error', reject);
      req.end();
    },
  );
}

interface LoadResult {
  rps: number;
  p50: number;
  non2xx: number;
  errors: number;
  /** CPU time (user + system) the server spent per request during the run, in microseconds. */
  cpuUsPerRequest: number;
  /** The server's resident memory right after the run. */
  rssMb: number;
}

/**
 * CPU time used so far by process `pid`, in microseconds (utime + stime of /proc/PID/stat, in
 * clock ticks of 10 ms). Fields are counted after the `)` that ends the command name.
 */
function cpuMicros(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

/**
 * autocannon in its own process, for `SECONDS`, against the server process `pid`; requests per
 * second, latency, and the server's CPU time per request. On a shared machine the throughput
 * moves with the neighbours' load (and the bare server is limited by autocannon itself, not by
 * its own CPU); the CPU time per request is what the code costs, and moves much less.
 */
async function load(
  pid: number,
  port: number,
  path: string,
  headers: Record<string, string>,
  seconds = SECONDS,
) {
  const args = [AUTOCANNON, '-j', '-c', String(CONNECTIONS), '-d', String(seconds)];
  for (const [k, v] of Object.entries(headers)) args.push('-H', `${k}=${v}`);
  args.push(`http://127.0.0.1:${port}${path}`);
  const cpuBefore = cpuMicros(pid);
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'ignore'] });
  let out = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  await once(child, 'close');
  const r = JSON.parse(out);
  return {
    rps: r.requests.average,
    p50: r.latency.p50,
    non2xx: r.non2xx,
    errors: r.errors,
    cpuUsPerRequest: (cpuMicros(pid) - cpuBefore) / Math.max(r.requests.total, 1),
    rssMb: memoryMb(pid, 'VmRSS'),
  } as LoadResult;
}

/** Resident memory of process `pid` now (`VmRSS`) or at its peak so far (`VmHWM`), from /proc. */
function memoryMb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1]) / 1024;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

let nextPort = 18_000 + (process.pid % 1000) * 4;

/**
 * Starts the real server on `databaseUrl`, creates a key, and measures page-1 throughput against
 * a bare server with the same bytes (alternating, best of two rounds each, to damp the noise of a
 * shared machine). The issue sets the >= 50% target for embedded SQLite mode and asks for the same
 * ratio to be reported for PostgreSQL + Redis (`ratioTarget`). Returns what later measurements need.
 */
async function serverAndRatio(label: string, env: Record<string, string>, ratioTarget: boolean) {
  const created = await cli(
    ['keys', 'create', '--account', DEMO_ACCOUNT_ID, '--name', `bench ${label}`, '--json'],
    env,
  );
  const auth = { authorization: `Bearer ${JSON.parse(created.stdout).key}` };
  const port = nextPort++;
  const server = await start(
    [CLI, 'serve'],
    { ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
    async () => (await get(port, '/api/v1/public/incidents?limit=1', auth)).status === 200,
  );

  const first = await get(port, PAGE_ONE, auth);
  if (first.status !== 200) throw new Error(`page 1 answered ${first.status}`);
  const bodyPath = join(WORK, `page-one-${label}.json`);
  writeFileSync(bodyPath, first.body);
  const barePort = nextPort++;
  const sameHeaders = {
    'content-type': first.headers['content-type'] as string,
    etag: first.headers.etag as string,
    'x-ratelimit-limit': first.headers['x-ratelimit-limit'] as string,
    'x-ratelimit-remaining': first.headers['x-ratelimit-remaining'] as string,
    'x-ratelimit-reset': first.headers['x-ratelimit-reset'] as string,
    'x-request-id': first.headers['x-request-id'] as string,
  };
  const bare = await start(
    [
      '--import',
      'tsx',
      join(ROOT, 'bench/bare-server.ts'),
      bodyPath,
      JSON.stringify(sameHeaders),
      String(barePort),
    ],
    {},
    async () => (await get(barePort, '/')).status === 200,
  );

  log(`${label}: page 1 throughput, bare node:http vs the API, ${SECONDS} s each, two rounds`);
  const bareRuns: LoadResult[] = [];
  const apiRuns: LoadResult[] = [];
  for (let round = 0; round < 2; round += 1) {
    bareRuns.push(await load(bare.pid as number, barePort, PAGE_ONE, {}));
    apiRuns.push(await load(server.pid as number, port, PAGE_ONE, auth));
  }
  await stop(bare);
  const bareRps = Math.max(...bareRuns.map((r) => r.rps));
  const apiRps = Math.max(...apiRuns.map((r) => r.rps));
  const failures = apiRuns.reduce((n, r) => n + r.non2xx + r.errors, 0);
  const ratio = apiRps / bareRps;
  rows.push({
    measurement: `${label}: page 1 req/s, API vs bare node:http (same bytes, ${first.body.length} B)`,
    result: `${fmt(apiRps)} vs ${fmt(bareRps)} = ${fmt(ratio * 100)}%${failures > 0 ? ` (${failures} non-2xx!)` : ''}`,
    target: ratioTarget ? '>= 50%' : 'report',
    pass: ratioTarget ? ratio >= 0.5 && failures === 0 : failures === 0 ? null : false,
  });
  const bareCpu = Math.min(...bareRuns.map((r) => r.cpuUsPerRequest));
  const apiCpu = Math.min(...apiRuns.map((r) => r.cpuUsPerRequest));
  rows.push({
    measurement: `${label}: page 1 server CPU per request, API vs bare node:http (least of two rounds)`,
    result: `${fmt(apiCpu)} vs ${fmt(bareCpu)} µs = ${fmt(apiCpu / bareCpu, 2)}x`,
    target: 'report',
    pass: null,
  });
  return { server, port, auth, etag: first.headers.etag as string, apiRps, apiRuns };
}

/** Median latency of the first (uncached) read of `count` pages starting at `from`. */
async function coldPages(port: number, auth: Record<string, string>, from: number, count: number) {
  const latencies: number[] = [];
  for (let page = from; page < from + count; page += 1) {
    const res = await get(port, `/api/v1/public/incidents?page=${page}&limit=50`, auth);
    if (res.status !== 200) throw new Error(`page ${page} answered ${res.status}`);
    latencies.push(res.ms);
  }
  return median(latencies);
}

async function sqliteMode(dataFile: string): Promise<void> {
  const env = { DATABASE_URL: `sqlite:${join(WORK, 'bench.db')}` };
  log(`importing ${fmt(INCIDENTS)} incidents into SQLite`);
  const imported = await cli(['import', dataFile], env);
  const importRate = INCIDENTS / imported.seconds;
  rows.push({
    measurement: `import ${fmt(INCIDENTS)} incidents from NDJSON into SQLite (whole CLI run)`,
    result: `${fmt(imported.seconds, 1)} s = ${fmt(importRate)} incidents/s`,
    target: '>= 50,000/s',
    pass: importRate >= 50_000,
  });
  rows.push({
    measurement: 'import peak RSS',
    result: `${fmt(imported.rssMb)} MB`,
    target: 'flat with file size',
    pass: null,
  });

  const { server, port, auth, etag, apiRps, apiRuns } = await serverAndRatio('SQLite', env, true);

  log('median latency of uncached pages: first, middle, last');
  const lastPage = Math.ceil(INCIDENTS / 50);
  const span = Math.min(200, Math.floor(lastPage / 3));
  const first = await coldPages(port, auth, 1, span);
  const middle = await coldPages(port, auth, Math.floor(lastPage / 2), span);
  const last = await coldPages(port, auth, lastPage - span + 1, span);
  rows.push({
    measurement: `median latency, page 1..${span} (uncached, one connection)`,
    result: `${fmt(first, 2)} ms`,
    target: 'reference',
    pass: null,
  });
  for (const [name, ms] of [
    [`middle pages from ${Math.floor(lastPage / 2)}`, middle],
    [`last pages up to ${lastPage}`, last],
  ] as const) {
    rows.push({
      measurement: `median latency, ${name}, vs page 1`,
      result: `${fmt(ms, 2)} ms = ${fmt(ms / first, 2)}x`,
      target: '<= 2x',
      pass: ms / first <= 2,
    });
  }
  const cachedLast = await load(
    server.pid as number,
    port,
    `/api/v1/public/incidents?page=${lastPage}&limit=50`,
    auth,
    Math.max(3, SECONDS / 2),
  );
  const cachedFirst = await load(server.pid as number, port, PAGE_ONE, auth, Math.max(3, SECONDS / 2));
  rows.push({
    measurement: `median latency under load (${CONNECTIONS} connections), last page vs page 1`,
    result: `${fmt(cachedLast.p50, 2)} vs ${fmt(cachedFirst.p50, 2)} ms`,
    target: '<= 2x',
    pass: cachedLast.p50 <= 2 * Math.max(cachedFirst.p50, 1),
  });

  log('walking every incident with limit=200');
  const walkStarted = performance.now();
  let seen = 0;
  for (let page = 1; ; page += 1) {
    const res = await get(port, `/api/v1/public/incidents?page=${page}&limit=200`, auth);
    const body = JSON.parse(res.body.toString('utf8'));
    if (body.data.data.length === 0) break;
    seen += body.data.data.length;
  }
  const walkSeconds = (performance.now() - walkStarted) / 1000;
  rows.push({
    measurement: 'walk all incidents, limit=200, one connection, in order',
    result: `${fmt(seen)} rows in ${fmt(walkSeconds, 1)} s = ${fmt(seen / walkSeconds)} rows/s`,
    target: `all ${fmt(INCIDENTS)} rows`,
    pass: seen === INCIDENTS,
  });

  log('304 throughput');
  const notModified = await load(server.pid as number, port, PAGE_ONE, { ...auth, 'if-none-match': etag });
  const remainingBefore = Number((await get(port, PAGE_ONE, auth)).headers['x-ratelimit-remaining']);
  await get(port, PAGE_ONE, { ...auth, 'if-none-match': etag });
  const remainingAfter = Number((await get(port, PAGE_ONE, auth)).headers['x-ratelimit-remaining']);
  rows.push({
    measurement: 'If-None-Match with the current ETag: 304 req/s, uncounted',
    result: `${fmt(notModified.rps)} req/s (${fmt(notModified.rps / apiRps, 2)}x the 200s); a 304 cost ${remainingBefore - remainingAfter - 1} requests`,
    target: '304, not counted',
    pass: notModified.non2xx > 0 && remainingBefore - remainingAfter === 1,
  });
  const loads = [...apiRuns, cachedLast, cachedFirst, notModified];
  rows.push({
    measurement:
      'server RSS after each load run (page 1 twice, last page, page 1, 304s; walk before the 304s)',
    result: loads.map((r) => fmt(r.rssMb)).join(', ') + ' MB',
    target: 'stable',
    pass: null,
  });
  rows.push({
    measurement: 'server peak RSS after all the load above',
    result: `${fmt(memoryMb(server.pid as number, 'VmHWM'))} MB`,
    target: 'bounded (page cache 64 MiB, body cache 32 MiB)',
    pass: null,
  });

  log('importing 10 more incidents while the server runs');
  const extra = join(WORK, 'extra.ndjson');
  // Newer than every generated incident (those end at the generator's `now`): an append.
  const records = Array.from({ length: 10 }, (_, i) => ({
    type: 'incident',
    id: randomUUID(),
    account_id: DEMO_ACCOUNT_ID,
    incident_number: `INC-2026-9${String(i).padStart(4, '0')}`,
    status: 'open',
    created_at: new Date(Date.UTC(2026, 0, 1, 1, 0, i)).toISOString(),
  }));
  await writeNdjson(extra, records);
  await cli(['import', extra], env);
  const after = JSON.parse((await get(port, PAGE_ONE, auth)).body.toString('utf8'));
  rows.push({
    measurement: '`total` right after an import (from the account row, no COUNT)',
    result: `${fmt(after.data.pagination.total)}`,
    target: fmt(INCIDENTS + 10),
    pass: after.data.pagination.total === INCIDENTS + 10,
  });
  await stop(server);
}

async function postgresMode(): Promise<void> {
  const name = `safety_bench_${process.pid}`;
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(PG_ADMIN_URL);
  url.pathname = `/${name}`;
  try {
    const env = { DATABASE_URL: url.toString(), REDIS_URL: REDIS_URL };
    const dataFile = join(WORK, 'pg.ndjson');
    await writeNdjson(dataFile, demoRecords({ incidents: PG_INCIDENTS, rateLimitPerHour: 1_000_000_000 }));
    log(`importing ${fmt(PG_INCIDENTS)} incidents into PostgreSQL`);
    const imported = await cli(['import', dataFile], env);
    rows.push({
      measurement: `PostgreSQL: import ${fmt(PG_INCIDENTS)} incidents`,
      result: `${fmt(imported.seconds, 1)} s = ${fmt(PG_INCIDENTS / imported.seconds)} incidents/s`,
      target: 'report',
      pass: null,
    });
    const { server } = await serverAndRatio('PostgreSQL + Redis', env, false);
    await stop(server);
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

function printTable(): void {
  const header = ['measurement', 'result', 'target', 'pass'];
  const cells = rows.map((r) => [
    r.measurement,
    r.result,
    r.target,
    r.pass === null ? '-' : r.pass ? 'PASS' : 'FAIL',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => (c[i] as string).length)));
  const line = (c: string[]) => `| ${c.map((v, i) => v.padEnd(widths[i] as number)).join(' | ')} |`;
  console.log(
    `\nSafety Incident API benchmark: ${fmt(INCIDENTS)} incidents, ${CONNECTIONS} connections, ${SECONDS} s runs\n`,
  );
  console.log(line(header));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const c of cells) console.log(line(c));
}

mkdirSync(WORK, { recursive: true });
try {
  const dataFile = join(WORK, 'bench.ndjson');
  log(`generating ${fmt(INCIDENTS)} incidents`);
  await writeNdjson(
    dataFile,
    demoRecords({
      incidents: INCIDENTS,
      rateLimitPerHour: 1_000_000_000,
      now: new Date('2026-01-01T00:00:00Z'),
    }),
  );
  await sqliteMode(dataFile);
  if (process.env.BENCH_SKIP_POSTGRES !== '1') await postgresMode();
  printTable();
} finally {
  for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
  agent.destroy();
  rmSync(WORK, { recursive: true, force: true });
}
