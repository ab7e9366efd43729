import { Redis } from 'ioredis';
import pg from 'pg';
import { nextPort } from './api.ts';
import { cpuMicros, startServer, stop } from './processes.ts';

/**
 * What one request costs the shared stores, counted by the stores themselves: PostgreSQL's
 * committed and rolled-back transactions in the bench database (`pg_stat_database`), and the
 * commands a Redis of the bench's own has run (`INFO commandstats`), and that Redis's CPU time. The
 * Redis is the bench's own so that nothing else on the machine adds to its counts.
 */
export interface StoreCounter {
  name: string;
  /** The running total now. */
  read(): Promise<number>;
  /** What the last two readings' difference was made of, per request, when the store can tell. */
  breakdown?(requests: number): string;
  /** The target, when it sets one: fewer than this per request. */
  below?: number;
}

/**
 * Runs `body` with the URL and process id of a redis-server of its own on a free port, stopped
 * afterwards.
 */
export async function withOwnRedis<T>(body: (url: string, pid: number) => Promise<T>): Promise<T> {
  const port = nextPort();
  const url = `redis://127.0.0.1:${port}`;
  const server = await startServer(
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    {},
    async () => {
      const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      probe.on('error', () => {});
      try {
        await probe.connect();
        return (await probe.ping()) === 'PONG';
      } finally {
        probe.disconnect();
      }
    },
    { store: 'redis-server' },
  );
  try {
    return await body(url, server.pid);
  } finally {
    await stop(server);
  }
}

/**
 * Commands Redis has run, less the `INFO` calls that read the count. A script's own commands count
 * too (`EVALSHA` and the `INCRBY` it runs are two), which is what Redis spends its time on;
 * `breakdown` says which were sent and which a script ran.
 */
export function redisCommands(url: string): StoreCounter & { close(): void } {
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  const byCommand = async () => {
    const info = await client.info('commandstats');
    const calls = new Map<string, number>();
    for (const match of info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) {
      if (match[1] !== 'info') calls.set(match[1] as string, Number(match[2]));
    }
    return calls;
  };
  let first = new Map<string, number>();
  let last = new Map<string, number>();
  return {
    name: 'Redis commands',
    async read() {
      first = last;
      last = await byCommand();
      return [...last.values()].reduce((a, b) => a + b, 0);
    },
    breakdown(requests: number) {
      return [...last]
        .map(([command, calls]): [string, number] => [
          command,
          (calls - (first.get(command) ?? 0)) / requests,
        ])
        .filter(([, perRequest]) => perRequest >= 0.001)
        .map(([command, perRequest]) => `${command} ${perRequest.toFixed(3)}`)
        .join(', ');
    },
    close: () => client.disconnect(),
  };
}

/**
 * Transactions committed or rolled back in the database of `url`, its own reading included (one
 * each; the per-request figure is far above that only when requests reach PostgreSQL). A backend
 * reports its counts to the statistics at most once a second, so a reading waits that long first.
 */
export function postgresTransactions(url: string): StoreCounter & { close(): Promise<void> } {
  const client = new pg.Client({ connectionString: url });
  const connected = client.connect();
  return {
    name: 'PostgreSQL transactions',
    below: 0.01,
    async read() {
      await connected;
      await new Promise((resolve) => setTimeout(resolve, 1100));
      await client.query('SELECT pg_stat_clear_snapshot()');
      const result = await client.query<{ total: string }>(
        'SELECT xact_commit + xact_rollback AS total FROM pg_stat_database WHERE datname = current_database()',
      );
      return Number(result.rows[0]?.total);
    },
    close: () => client.end(),
  };
}

/** CPU time (user + system) process `pid` has used, in µs: the bench's own Redis's, per request. */
export function processCpu(name: string, pid: number): StoreCounter {
  return { name, read: async () => cpuMicros(pid) };
}
