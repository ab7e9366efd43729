import { type ChildProcess, spawn } from 'node:child_process';
import { connect, createServer, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import pg from 'pg';
import type { StoreName } from '../../src/db/database.ts';
import { ADMIN_PG_URL, createTestContext, type TestContext } from '../helpers.ts';
import { sleep } from '../wait.ts';

/**
 * Support for fault tests: a redis-server of the test's own, a log that records what the server
 * writes, and the whole application on a database of the test's own. Only processes started here
 * are ever stopped or killed.
 */

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

export interface OwnRedis {
  url: string;
  port: number;
  process: ChildProcess;
  /** A client of the test's own (no command timeout) to look at the counts. */
  inspect(): Redis;
  stop(): Promise<void>;
}

/**
 * `configFile` is read first (a Sentinel's, which it rewrites: keep it in a directory of the
 * test's own); `args` come last (`--replicaof`, `--sentinel`, …). `port`: a port of the test's
 * own to start on again (a restart after a kill); by default a free one. With `password`, the server
 * requires it (and gives it to the primary it replicates), and `url` holds it.
 */
export async function startRedis({
  configFile,
  args = [],
  password,
  port: fixedPort,
}: { configFile?: string; args?: string[]; password?: string; port?: number } = {}): Promise<OwnRedis> {
  const port = fixedPort ?? (await freePort());
  const child = spawn(
    'redis-server',
    [
      ...(configFile === undefined ? [] : [configFile]),
      ...['--port', String(port), '--save', '', '--appendonly', 'no'],
      ...(password === undefined ? [] : ['--requirepass', password, '--masterauth', password]),
      ...args,
    ],
    { stdio: 'ignore' },
  );
  const url = `redis://${password === undefined ? '' : `:${encodeURIComponent(password)}@`}127.0.0.1:${port}`;
  const clients: Redis[] = [];
  const inspect = () => {
    const client = new Redis(url, { lazyConnect: false, maxRetriesPerRequest: 1 });
    client.on('error', () => {});
    clients.push(client);
    return client;
  };
  const probe = inspect();
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      if ((await probe.ping()) === 'PONG') break;
    } catch (error) {
      if (Date.now() > deadline) throw error;
    }
    await sleep(50);
  }
  return {
    url,
    port,
    process: child,
    inspect,
    async stop() {
      for (const client of clients) client.disconnect();
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGCONT');
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGKILL');
        await exited;
      }
    },
  };
}

/**
 * A TCP relay to `targetUrl` (a redis:// or postgres:// URL; `url` is the same with the relay's
 * address) through which a test puts a network fault between one client and a server that every
 * other client still reaches:
 * - `cut()` drops its connections, and every new one at once, until `heal()`;
 * - `freeze()` lets nothing pass either way, for good, while connections stay open (half-open
 *   too: a host that stopped answering sends no FIN of its own), new ones accepted and left to hang;
 * - `slow(ms)` delays every chunk by `ms` in each direction (0: none), keeping their order.
 */
export async function startRelay(targetUrl: string): Promise<{
  url: string;
  cut(): void;
  heal(): void;
  freeze(): void;
  slow(ms: number): void;
  close(): Promise<void>;
}> {
  const target = new URL(targetUrl);
  const sockets = new Set<Socket>();
  let open = true;
  let frozen = false;
  let delayMs = 0;
  // Each direction keeps its order: a chunk leaves `delayMs` after it came, never before the one
  // that came before it.
  const forward = (from: Socket, to: Socket) => {
    let last = Promise.resolve();
    from.on('data', (chunk: Buffer) => {
      if (frozen) return;
      const due = Date.now() + delayMs;
      last = last.then(async () => {
        const wait = due - Date.now();
        if (wait > 0) await sleep(wait);
        if (!frozen) to.write(chunk);
      });
    });
    from.on('end', () => {
      if (!frozen) void last.then(() => to.end());
    });
  };
  const server = createServer({ allowHalfOpen: true }, (client) => {
    if (!open) return void client.destroy();
    const upstream = connect({ port: Number(target.port), host: target.hostname, allowHalfOpen: true });
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => {
        sockets.delete(socket);
        if (frozen) return;
        client.destroy();
        upstream.destroy();
      });
    }
    forward(client, upstream);
    forward(upstream, client);
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const url = new URL(targetUrl);
  url.host = `127.0.0.1:${port}`;
  return {
    url: url.toString(),
    cut() {
      open = false;
      for (const socket of sockets) socket.destroy();
    },
    heal() {
      open = true;
    },
    freeze() {
      frozen = true;
    },
    slow(ms: number) {
      delayMs = ms;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

export interface LogLine {
  level: 'warn' | 'error' | 'info';
  message: string;
}

/** A logger for `openRuntime` that keeps every line it is given. */
export function recordingLogger() {
  const lines: LogLine[] = [];
  const line = (level: LogLine['level']) => (first: unknown, second?: unknown) => {
    lines.push({ level, message: typeof first === 'string' ? first : String(second) });
  };
  return { lines, logger: { warn: line('warn'), error: line('error'), info: line('info') } };
}

/** A `TestContext` whose server's log lines are recorded. */
export interface FaultContext extends TestContext {
  lines: LogLine[];
}

/**
 * As `createTestContext`, with the server's log lines recorded. `route` gives the URL the server
 * reaches its database by (a relay's), from the database's own; `databaseUrl` stays the latter.
 */
export async function createFaultContext(
  store: StoreName,
  env: Record<string, string> = {},
  route: (databaseUrl: string) => Promise<string> = async (url) => url,
): Promise<FaultContext> {
  const { lines, logger } = recordingLogger();
  const ctx = await createTestContext(store, env, { runtimeLogger: logger, route });
  return Object.assign(ctx, { lines });
}

/** Runs `work` on a connection of the test's own to the server that holds the test databases. */
export async function withAdminClient<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: ADMIN_PG_URL });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/**
 * The name of the database at `databaseUrl`, which must be one a test created (test/helpers.ts):
 * the only databases whose sessions and settings a fault test may touch.
 */
export function ownDatabaseName(databaseUrl: string): string {
  const name = new URL(databaseUrl).pathname.slice(1);
  if (!name.startsWith('safety_test_')) throw new Error(`refusing to touch database ${name}`);
  return name;
}

/**
 * Ends every session on the test's own database (never on any other), and returns once each of
 * those backends has exited: `pg_terminate_backend` alone only signals, and a loaded machine can
 * take a while to schedule the exit, so a connection that looked idle and alive to the app would
 * die under the test's next request, after the fault was meant to be over.
 */
export async function terminateBackends(databaseUrl: string): Promise<void> {
  const name = ownDatabaseName(databaseUrl);
  const { rows } = await withAdminClient((client) =>
    client.query<{ pid: number; ended: boolean }>(
      'select pid, pg_terminate_backend(pid, 30000) as ended from pg_stat_activity where datname = $1',
      [name],
    ),
  );
  const alive = rows.filter((row) => !row.ended).map((row) => row.pid);
  if (alive.length > 0) throw new Error(`backends ${alive.join(', ')} still running 30 s after termination`);
}

/** Runs `request` and measures how long it took. */
export async function timed<T>(request: () => Promise<T>): Promise<{ result: T; ms: number }> {
  const started = performance.now();
  const result = await request();
  return { result, ms: performance.now() - started };
}
