import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { accessSync, constants, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { CLI, settings } from './settings.ts';

/** Children still running are stopped when the bench ends, however it ends. */
const children: ChildProcess[] = [];

/** The absolute path of `command` on PATH, or null. */
export function which(command: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const path = join(dir, command);
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // not in this directory
    }
  }
  return null;
}

/** The CPUs this process may run on, from `Cpus_allowed_list` (e.g. "0-1" or "0,2-3"). */
function allowedCpus(): number[] {
  const list = /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? '';
  return list.split(',').flatMap((part) => {
    const [low, high = low] = part.split('-').map(Number) as [number, number?];
    return Array.from({ length: high - low + 1 }, (_, i) => low + i);
  });
}

/**
 * The load generator and the server under load each get their own cores when taskset exists and
 * there are at least two: the servers (bare and API, one at a time) the last CPU, wrk the others.
 * Otherwise they share, and the heading of the table says so. PostgreSQL and Redis are not ours
 * to pin: they run wherever the kernel puts them.
 */
const pinning = (() => {
  const cpus = allowedCpus();
  if (!settings.pin || cpus.length < 2 || which('taskset') === null) return null;
  return { server: String(cpus.at(-1)), loadGenerator: cpus.slice(0, -1).join(',') };
})();

export function pinningDescription(): string {
  if (!settings.pin) return 'not pinned (BENCH_PIN=0): wrk and the server share every core';
  if (pinning === null) return 'not pinned (no taskset, or one CPU): wrk and the server share the cores';
  return `pinned with taskset: wrk on CPU ${pinning.loadGenerator}, the server under load on CPU ${pinning.server}`;
}

/** `command args` as spawn arguments, behind taskset when pinning applies to `role`. */
export function pinned(
  role: 'server' | 'loadGenerator',
  command: string,
  args: string[],
): [string, string[]] {
  return pinning === null ? [command, args] : ['taskset', ['-c', pinning[role], command, ...args]];
}

/** Runs the CLI to completion; returns stdout, the wall time and the child's peak RSS. */
export async function cli(args: string[], env: Record<string, string>) {
  const started = performance.now();
  // GNU time reports the peak resident set and CPU time of the whole command, on the last line of stderr.
  const child = spawn('/usr/bin/time', ['-f', 'peak-rss-kb %M cpu-s %U %S', process.execPath, CLI, ...args], {
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
  const cpu = /cpu-s ([\d.]+) ([\d.]+)/.exec(stderr);
  const cpuSeconds = cpu === null ? Number.NaN : Number(cpu[1]) + Number(cpu[2]);
  return { stdout, seconds: (performance.now() - started) / 1000, rssMb: rssKb / 1024, cpuSeconds };
}

/** How a server is started when it is not a Node.js server pinned to the server's CPU. */
export interface StartOptions {
  /** Another program (the bench's own redis-server), not pinned: like PostgreSQL, it runs where the kernel puts it. */
  store?: string;
  /** A program that runs Node.js under it (valgrind and its options), not pinned, given 2 minutes to start. */
  wrapper?: string[];
}

/**
 * Starts a long-running Node.js server (pinned to the server's CPU) and waits until `ready()`
 * resolves true. taskset (and valgrind) exec node, so the child's pid is the server's own.
 */
export async function startServer(
  args: string[],
  env: Record<string, string>,
  ready: () => Promise<boolean>,
  { store, wrapper }: StartOptions = {},
) {
  const [command, argv] =
    store !== undefined
      ? [store, args]
      : wrapper !== undefined
        ? [wrapper[0] as string, [...wrapper.slice(1), process.execPath, ...args]]
        : pinned('server', process.execPath, args);
  const child = spawn(command, argv, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  const attempts = wrapper === undefined ? 200 : 1200;
  for (let i = 0; i < attempts; i += 1) {
    if (child.exitCode !== null) throw new Error(`${args.join(' ')} exited with ${child.exitCode}`);
    if (await ready().catch(() => false)) return child as ChildProcess & { pid: number };
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${args.join(' ')} did not start`);
}

export async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  await once(child, 'exit');
}

export function stopAll(): void {
  for (const child of children)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
}

/** Clock ticks per second of /proc/PID/stat's times (USER_HZ; 100 on Linux x86, asked, not assumed). */
const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());

/**
 * CPU time used so far by every thread of process `pid`, in microseconds: utime + stime of
 * /proc/PID/stat, fields 14 and 15, counted here after the `)` that ends the command name.
 */
export function cpuMicros(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / CLOCK_TICKS;
}

/** Resident memory of process `pid` now (`VmRSS`) or at its peak so far (`VmHWM`), from /proc. */
export function memoryMb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1]) / 1024;
}

/**
 * Samples the VmRSS of process `pid` every `everyMs` until `stop()`, which returns the RSS when
 * sampling began and the highest sample (VmHWM cannot say this: it keeps the peak of the process's
 * whole life, and earlier runs may have set it).
 */
export function sampleMemory(pid: number, everyMs = 10): { stop(): { beforeMb: number; peakMb: number } } {
  const beforeMb = memoryMb(pid, 'VmRSS');
  let peakMb = beforeMb;
  const timer = setInterval(() => {
    peakMb = Math.max(peakMb, memoryMb(pid, 'VmRSS'));
  }, everyMs);
  return {
    stop() {
      clearInterval(timer);
      peakMb = Math.max(peakMb, memoryMb(pid, 'VmRSS'));
      return { beforeMb, peakMb };
    },
  };
}
