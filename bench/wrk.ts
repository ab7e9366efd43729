import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { cpuMicros, memoryMb, pinned, which } from './processes.ts';
import { log } from './report.ts';
import { ROOT, settings } from './settings.ts';

/**
 * Load runs with wrk, a C load generator: one wrk thread on its own core outruns a bare node:http
 * server on another, so a ratio against that server measures the servers, not the load generator
 * (which autocannon, in JavaScript, did not).
 */

const REPORT_SCRIPT = join(ROOT, 'bench/wrk-report.lua');

/** Makes sure `wrk` is on PATH: installs the Debian package as root when apt-get exists, else stops. */
export function ensureWrk(): void {
  if (which('wrk') !== null) return;
  if (process.getuid?.() !== 0 || which('apt-get') === null) {
    throw new Error(
      'wrk is not installed: install the package `wrk` (Debian/Ubuntu: sudo apt-get install wrk) and run again',
    );
  }
  log('wrk is missing: apt-get install -y wrk');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = () => spawnSync('apt-get', ['install', '-y', 'wrk'], { stdio: 'inherit', env }).status;
  // A fresh container has no package lists yet: fetch them once and try again.
  if (
    install() !== 0 &&
    (spawnSync('apt-get', ['update'], { stdio: 'inherit', env }).status !== 0 || install() !== 0)
  ) {
    throw new Error('apt-get install -y wrk failed: install the package `wrk` and run again');
  }
}

/** wrk's first line of `-v`, e.g. "wrk 4.1.0 [epoll] Copyright (C) 2012 Will Glozer". */
export function wrkVersion(): string {
  const out = spawnSync('wrk', ['-v'], { encoding: 'utf8' });
  return /^wrk \S+/.exec(`${out.stdout}${out.stderr}`)?.[0] ?? 'wrk';
}

export interface LoadResult {
  requests: number;
  rps: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  /** Socket errors: connect, read, write, timeout. */
  socketErrors: number;
  /** Responses with a status of 400 or more (wrk counts those; 1xx never occur here). */
  non2xx3xx: number;
  /** Responses by status, only when the run asked for them (`countStatuses`). */
  statuses: Record<string, number>;
  /** CPU time (user + system, every thread) the server spent per request during the run, in µs. */
  cpuUsPerRequest: number;
  /** The server's CPU time over the run's wall time: 100 is one core busy all the time. */
  cpuPercent: number;
  /** The server's resident memory right after the run. */
  rssMb: number;
}

interface WrkReport {
  requests: number;
  duration_us: number;
  latency_us: { p50: number; p90: number; p99: number; max: number };
  errors: { connect: number; read: number; write: number; timeout: number };
  non_2xx_3xx: number;
  statuses: Record<string, number>;
}

/**
 * wrk against the server process `pid` on `port`, for `seconds`: throughput and latency from wrk,
 * and the server's CPU time over the same run from /proc (sampled right before wrk starts and
 * right after it ends). `until`: the run ends early when it settles (wrk stops on SIGINT and
 * still reports), so that a run lasts exactly as long as something else running beside it.
 */
export async function load(
  pid: number,
  port: number,
  path: string,
  headers: Record<string, string>,
  options: { seconds?: number; countStatuses?: boolean; until?: Promise<unknown> } = {},
): Promise<LoadResult> {
  const seconds = options.seconds ?? settings.seconds;
  const args = ['-t', String(settings.threads), '-c', String(settings.connections), '-d', `${seconds}s`];
  args.push('--timeout', '10s', '-s', REPORT_SCRIPT);
  args.push(`http://127.0.0.1:${port}${path}`);
  const [command, argv] = pinned('loadGenerator', 'wrk', args);

  const cpuBefore = cpuMicros(pid);
  const started = performance.now();
  const child = spawn(command, argv, {
    env: {
      ...process.env,
      WRK_HEADERS: Object.entries(headers)
        .map(([name, value]) => `${name}: ${value}`)
        .join('\n'),
      WRK_COUNT_STATUSES: options.countStatuses ? '1' : '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  child.stderr.on('data', (d) => {
    err += d;
  });
  const stopEarly = () => {
    if (child.exitCode === null) child.kill('SIGINT');
  };
  options.until?.then(stopEarly, stopEarly);
  const [code] = await once(child, 'close');
  const cpu = cpuMicros(pid) - cpuBefore;
  const wallUs = (performance.now() - started) * 1000;

  const line = out.split('\n').find((l) => l.startsWith('wrk-report '));
  if (code !== 0 || line === undefined) throw new Error(`wrk failed (exit code ${code}): ${err}${out}`);
  const r = JSON.parse(line.slice('wrk-report '.length)) as WrkReport;
  const ms = (us: number) => us / 1000;
  return {
    requests: r.requests,
    rps: r.requests / (r.duration_us / 1_000_000),
    latencyMs: {
      p50: ms(r.latency_us.p50),
      p90: ms(r.latency_us.p90),
      p99: ms(r.latency_us.p99),
      max: ms(r.latency_us.max),
    },
    socketErrors: r.errors.connect + r.errors.read + r.errors.write + r.errors.timeout,
    non2xx3xx: r.non_2xx_3xx,
    statuses: r.statuses,
    cpuUsPerRequest: cpu / Math.max(r.requests, 1),
    cpuPercent: (cpu / wallUs) * 100,
    rssMb: memoryMb(pid, 'VmRSS'),
  };
}

/** Requests of a run that did not get a 2xx/3xx answer, or none at all. */
export function failures(runs: LoadResult[]): number {
  return runs.reduce((n, r) => n + r.non2xx3xx + r.socketErrors, 0);
}
