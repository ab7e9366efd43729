import { join } from 'node:path';

/**
 * The bench's own settings, from BENCH_* environment variables (docs/performance.md lists them).
 * They configure the load and the data set, not the service: the service reads its settings
 * through src/config.ts in the processes the bench starts.
 */

function positiveInteger(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^[1-9]\d*$/.test(raw)) throw new Error(`${name} must be a positive integer (got "${raw}")`);
  return Number(raw);
}

export const ROOT = new URL('..', import.meta.url).pathname;
export const CLI = join(ROOT, 'bin/safety-api.js');
/** Work files of this run; removed at the end. */
export const WORK = join(ROOT, '.bench', `run-${process.pid}`);

const incidents = positiveInteger('BENCH_INCIDENTS', 1_000_000);

/**
 * `BENCH_ONLY=sync`: only issue 12's measurements (export, feed, deletion), after the same import.
 * `BENCH_ONLY=scale`: only issue 13's, the page-1 ratios of both stores with what each request
 * costs PostgreSQL and Redis. `BENCH_ONLY=webhooks`: only the webhook deliveries of both stores.
 * `BENCH_ONLY=usage`: only issue 24's, page 1 with key usage recorded and without, on both stores.
 * `BENCH_ONLY=tenfold`: only issue 25's ten million, a store of BENCH_TENFOLD_INCIDENTS against
 * one of BENCH_INCIDENTS, on both stores. `BENCH_ONLY=copy`: only issue 39's, `copy-store` of the
 * SQLite store of BENCH_INCIDENTS into a fresh PostgreSQL database. `BENCH_ONLY=tracing`: only
 * issue 37's, page-1 CPU per request with tracing off beside the build without tracing code, and
 * with tracing on (every request, and 10%), on SQLite. `BENCH_ONLY=accounts`: only issue 39's
 * `accounts export`, its import into an empty store and `accounts delete`, on both stores.
 * `BENCH_ONLY=import`: only issue 39's imports of full-field files oldest first, newest first and
 * shuffled, BENCH_INCIDENTS on SQLite and BENCH_PG_INCIDENTS on PostgreSQL.
 */
const only = process.env.BENCH_ONLY ?? '';
const MODES = ['', 'sync', 'scale', 'webhooks', 'usage', 'tenfold', 'copy', 'tracing', 'accounts', 'import'];
if (!MODES.includes(only)) {
  throw new Error(
    `BENCH_ONLY must be "sync", "scale", "webhooks", "usage", "tenfold", "copy", "tracing", "accounts", "import" or unset (got "${only}")`,
  );
}
const webhookEvents = positiveInteger('BENCH_WEBHOOK_EVENTS', Math.min(incidents, 100_000));

export const settings = {
  incidents,
  /** `BENCH_ONLY=tenfold`: the large store's incidents, against BENCH_INCIDENTS. */
  tenfoldIncidents: positiveInteger('BENCH_TENFOLD_INCIDENTS', incidents * 10),
  pgIncidents: positiveInteger('BENCH_PG_INCIDENTS', Math.min(incidents, 100_000)),
  /** Length of each load run. */
  seconds: positiveInteger('BENCH_SECONDS', 10),
  /** Alternating rounds of the bare server and the API for each page-1 ratio. */
  rounds: positiveInteger('BENCH_ROUNDS', 2),
  /** One wrk thread by default: on 2 cores, one core for wrk and one for the server. */
  threads: positiveInteger('BENCH_THREADS', 1),
  connections: positiveInteger('BENCH_CONNECTIONS', 50),
  pin: process.env.BENCH_PIN !== '0',
  skipPostgres: process.env.BENCH_SKIP_POSTGRES === '1',
  only,
  pgAdminUrl: process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
  /**
   * Node.js options of the server the page-1, walk, export and feed runs measure: as README's
   * "Memory" advises deploying it (V8's young generation capped); `BENCH_SERVER_NODE_OPTIONS=` (empty)
   * measures Node's defaults.
   */
  serverNodeOptions: (process.env.BENCH_SERVER_NODE_OPTIONS ?? '--max-semi-space-size=16')
    .split(' ')
    .filter((option) => option !== ''),
  /** Webhooks: the incidents of the one import delivered to one receiver. */
  webhookEvents,
  /** Webhooks: one-incident imports in a row, each timed from its commit to its receipt. */
  webhookSingles: positiveInteger('BENCH_WEBHOOK_SINGLES', 100),
  /** Webhooks: endpoints of the fan-out run, all on one account, each its own receiver port. */
  webhookEndpoints: positiveInteger('BENCH_WEBHOOK_ENDPOINTS', 100),
  /** Webhooks: changes of the fan-out run, each delivered to every endpoint. */
  webhookFanOutEvents: positiveInteger(
    'BENCH_WEBHOOK_FANOUT_EVENTS',
    Math.max(1, Math.min(10_000, Math.floor(webhookEvents / 10))),
  ),
};

if (settings.connections < settings.threads) {
  throw new Error('BENCH_CONNECTIONS must be at least BENCH_THREADS (wrk gives each thread a connection)');
}
