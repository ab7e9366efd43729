import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { startApi } from './api.ts';
import { generateDataset, importFile, withPostgresDatabase } from './data.ts';
import { closeConnections } from './http.ts';
import { pinningDescription, stop, stopAll } from './processes.ts';
import { instructionsPageOne } from './instructions.ts';
import { profilePageOne } from './profile.ts';
import { fmt, log, printTable } from './report.ts';
import { accountsRoundTrip } from './scenarios/accounts.ts';
import { copyStoreRate } from './scenarios/copy.ts';
import { deleteIncidents } from './scenarios/delete.ts';
import { depth } from './scenarios/depth.ts';
import { exportIncidents } from './scenarios/export.ts';
import { feedCatchUp } from './scenarios/feed.ts';
import { importOrders, importRate, totalAfterImport } from './scenarios/import.ts';
import { memory, rssAfter } from './scenarios/memory.ts';
import { notModified } from './scenarios/not-modified.ts';
import { usageOverhead } from './scenarios/usage.ts';
import { pageOneRatio } from './scenarios/ratio.ts';
import { postgresStore, sqliteStore, tenfold } from './scenarios/tenfold.ts';
import { tracingOverhead } from './scenarios/tracing.ts';
import { walk } from './scenarios/walk.ts';
import { webhookDeliveries } from './scenarios/webhooks.ts';
import { settings, WORK } from './settings.ts';
import { postgresTransactions, processCpu, redisCommands, withOwnRedis } from './stores.ts';
import { ensureWrk, wrkVersion } from './wrk.ts';

/**
 * `npm run bench`: builds a demo account of BENCH_INCIDENTS incidents, imports it with the real
 * CLI, starts the real server, and measures it with wrk against a bare node:http server serving
 * the same bytes; then issue 12's: an export of every incident (alone and beside page-1 load), a
 * feed catch-up from no cursor, and 10,000 random deletions in one import (their time, the page
 * query's plan, pages 1 and last before and after); then the page-1 ratio, the export and the feed
 * on PostgreSQL + Redis; then webhook deliveries on each store, on a database of their own.
 * BENCH_ONLY=sync runs only issue 12's part (after the same import), BENCH_ONLY=webhooks only the
 * webhooks, BENCH_ONLY=usage only page 1 with key usage recorded and without (issue 24),
 * BENCH_ONLY=copy only copy-store of the SQLite store into PostgreSQL (issue 39),
 * BENCH_ONLY=tracing only page 1 with tracing off, on and absent (issue 37). Prints
 * one table with the target beside each result (docs/performance.md explains the method).
 * Everything runs on loopback, every load run is bounded in time, and the work files are removed
 * at the end.
 */

/** Issue 25's memory target is for a million incidents, on both stores; a smaller data set's RSS is reported. */
const judged = (incidents: number) => incidents >= 1_000_000;

async function sqliteMode(): Promise<void> {
  const env = { DATABASE_URL: `sqlite:${join(WORK, 'bench.db')}` };
  log(`generating ${fmt(settings.incidents)} incidents`);
  const dataFile = await generateDataset('sqlite.ndjson', settings.incidents);
  await importRate(dataFile, settings.incidents, env);
  if (settings.only === 'usage') return usageOverhead('SQLite', env);
  if (settings.only === 'copy') return copyStoreRate(env.DATABASE_URL, settings.incidents);
  if (settings.only === 'tracing') return tracingOverhead('SQLite', env);
  const api = await startApi('SQLite', env, settings.serverNodeOptions);
  try {
    if (settings.only === 'scale') {
      const { bareArgs } = await pageOneRatio('SQLite', api, 0.5);
      await stop(api.process);
      await profilePageOne('SQLite', env);
      await instructionsPageOne('SQLite', env, bareArgs);
      return;
    }
    if (settings.only === '') {
      const { etag, apiRuns, apiCpuUsPerRequest } = await pageOneRatio('SQLite', api, 0.5);
      const underLoad = await depth(api, settings.incidents);
      await walk('SQLite', api, settings.incidents);
      rssAfter('SQLite', api.pid, 'page-1 load and the walk', judged(settings.incidents));
      const conditional = await notModified(api, etag, apiCpuUsPerRequest);
      memory(
        api.pid,
        [...apiRuns, ...underLoad, conditional],
        `page 1 ×${apiRuns.length}, last page, page 1, 304s; the walk before the 304s`,
      );
      await totalAfterImport(api, settings.incidents, env);
    }
    await exportIncidents('SQLite', api, true);
    rssAfter('SQLite', api.pid, 'the exports', judged(settings.incidents));
    await feedCatchUp('SQLite', api, settings.incidents, true);
    rssAfter('SQLite', api.pid, 'the feed replay', judged(settings.incidents));
    await deleteIncidents(api, dataFile, env.DATABASE_URL, env);
  } finally {
    await stop(api.process);
  }
}

/**
 * PostgreSQL with a Redis of the bench's own (its command count is then the server's alone), as a
 * deployment of several instances runs; page 1 also reports what each request costs the two stores.
 */
async function postgresMode(): Promise<void> {
  await withPostgresDatabase((url) =>
    withOwnRedis(async (redisUrl, redisPid) => {
      const env = { DATABASE_URL: url, REDIS_URL: redisUrl };
      const dataFile = await generateDataset('pg.ndjson', settings.pgIncidents);
      await importRate(dataFile, settings.pgIncidents, env);
      if (settings.only === 'usage') {
        const transactions = postgresTransactions(url);
        try {
          return await usageOverhead('PostgreSQL + Redis', env, [transactions]);
        } finally {
          await transactions.close();
        }
      }
      const api = await startApi('PostgreSQL + Redis', env, settings.serverNodeOptions);
      const transactions = postgresTransactions(url);
      const commands = redisCommands(redisUrl);
      try {
        const redisCpu = processCpu('Redis CPU µs', redisPid);
        const ratio =
          settings.only === 'sync'
            ? null
            : await pageOneRatio('PostgreSQL + Redis', api, 0.4, [transactions, commands, redisCpu]);
        if (ratio !== null && settings.only === 'scale') {
          await stop(api.process);
          await profilePageOne('PostgreSQL + Redis', env);
          await instructionsPageOne('PostgreSQL + Redis', env, ratio.bareArgs);
          return;
        }
        const label = 'PostgreSQL + Redis';
        if (settings.only === '') {
          await walk(label, api, settings.pgIncidents);
          rssAfter(label, api.pid, 'page-1 load and the walk', judged(settings.pgIncidents));
        }
        await exportIncidents(label, api, false);
        rssAfter(label, api.pid, 'the exports', judged(settings.pgIncidents));
        await feedCatchUp(label, api, settings.pgIncidents, false);
        rssAfter(label, api.pid, 'the feed replay', judged(settings.pgIncidents));
      } finally {
        commands.close();
        await transactions.close();
        await stop(api.process);
      }
    }),
  );
}

/**
 * Webhook deliveries (bench/scenarios/webhooks.ts) on a fresh SQLite file, then on a fresh
 * PostgreSQL database with a Redis of the bench's own.
 */
async function webhooksMode(): Promise<void> {
  await webhookDeliveries('SQLite', { DATABASE_URL: `sqlite:${join(WORK, 'webhooks.db')}` });
  if (settings.skipPostgres) return;
  await withPostgresDatabase((url) =>
    withOwnRedis((redisUrl) =>
      webhookDeliveries('PostgreSQL + Redis', { DATABASE_URL: url, REDIS_URL: redisUrl }),
    ),
  );
}

/**
 * Issue 25's ten million: a store of BENCH_TENFOLD_INCIDENTS beside one of BENCH_INCIDENTS, both
 * imported from files generated once, on SQLite and then on PostgreSQL with a Redis of the bench's own.
 */
async function tenfoldMode(): Promise<void> {
  const sizes = { small: settings.incidents, large: settings.tenfoldIncidents };
  log(`generating ${fmt(sizes.small)} and ${fmt(sizes.large)} incidents`);
  const files = {
    small: await generateDataset('tenfold-small.ndjson', sizes.small),
    large: await generateDataset('tenfold-large.ndjson', sizes.large),
  };
  const sqlite = (size: 'small' | 'large') => sqliteStore(sizes[size], join(WORK, `tenfold-${size}.db`));
  await tenfold('SQLite', sqlite('small'), sqlite('large'), files);
  for (const size of ['small', 'large'] as const)
    for (const suffix of ['', '-wal', '-shm'])
      rmSync(join(WORK, `tenfold-${size}.db${suffix}`), { force: true });
  if (settings.skipPostgres) return;
  await withOwnRedis((redisUrl) =>
    withPostgresDatabase(
      (smallUrl) =>
        withPostgresDatabase(
          (largeUrl) =>
            tenfold(
              'PostgreSQL + Redis',
              postgresStore(sizes.small, smallUrl, redisUrl),
              postgresStore(sizes.large, largeUrl, redisUrl),
              files,
            ),
          '_large',
        ),
      '_small',
    ),
  );
}

/**
 * Issue 39's account export, its import into an empty store and the account's deletion, on a
 * SQLite file of BENCH_INCIDENTS incidents, then on PostgreSQL with BENCH_PG_INCIDENTS.
 */
async function accountsMode(): Promise<void> {
  log(`generating ${fmt(settings.incidents)} incidents`);
  const sqliteData = await generateDataset('accounts-sqlite.ndjson', settings.incidents);
  const env = { DATABASE_URL: `sqlite:${join(WORK, 'accounts.db')}` };
  await importFile(sqliteData, env);
  rmSync(sqliteData, { force: true });
  await accountsRoundTrip(
    'SQLite',
    env,
    { DATABASE_URL: `sqlite:${join(WORK, 'accounts-fresh.db')}` },
    settings.incidents,
  );
  if (settings.skipPostgres) return;
  const pgData = await generateDataset('accounts-pg.ndjson', settings.pgIncidents);
  await withPostgresDatabase(
    (url) =>
      withPostgresDatabase(async (freshUrl) => {
        await importFile(pgData, { DATABASE_URL: url });
        rmSync(pgData, { force: true });
        await accountsRoundTrip(
          'PostgreSQL',
          { DATABASE_URL: url },
          { DATABASE_URL: freshUrl },
          settings.pgIncidents,
        );
      }, '_fresh'),
    '_accounts',
  );
}

/** Issue 39: full-field files in three orders, on SQLite and then on PostgreSQL. */
async function importMode(): Promise<void> {
  await importOrders('SQLite', settings.incidents);
  if (!settings.skipPostgres) await importOrders('PostgreSQL', settings.pgIncidents);
}

const loadAverage = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

ensureWrk();
mkdirSync(WORK, { recursive: true });
const loadBefore = loadAverage();
try {
  if (settings.only === 'tenfold') await tenfoldMode();
  else if (settings.only === 'accounts') await accountsMode();
  else if (settings.only === 'import') await importMode();
  else if (settings.only !== 'webhooks') {
    await sqliteMode();
    if (!settings.skipPostgres && settings.only !== 'copy' && settings.only !== 'tracing')
      await postgresMode();
  }
  if (settings.only === '' || settings.only === 'webhooks') await webhooksMode();
} finally {
  // Also when a step failed: what was measured before it is printed, then the error.
  printTable([
    `Safety Incident API benchmark, ${new Date().toISOString().slice(0, 10)}: ` +
      (settings.only === 'webhooks'
        ? 'webhooks only'
        : settings.only === 'tracing'
          ? `tracing only, ${fmt(settings.incidents)} incidents on SQLite`
          : settings.only === 'import'
            ? `imports of ${fmt(settings.incidents)} full-field incidents in three orders (PostgreSQL ${settings.skipPostgres ? 'skipped' : fmt(settings.pgIncidents)})`
            : settings.only === 'tenfold'
              ? `${fmt(settings.tenfoldIncidents)} incidents beside ${fmt(settings.incidents)}`
              : `${fmt(settings.incidents)} incidents (PostgreSQL ${settings.skipPostgres ? 'skipped' : fmt(settings.pgIncidents)})`) +
      (settings.only === '' || settings.only === 'webhooks'
        ? `; webhooks: ${fmt(settings.webhookEvents)} events to one endpoint, ${settings.webhookSingles} single changes, ` +
          `${settings.webhookEndpoints} endpoints × ${fmt(settings.webhookFanOutEvents)} events`
        : ''),
    `${wrkVersion()}, ${settings.threads} thread(s), ${settings.connections} connections, ` +
      `${settings.seconds} s runs, ${settings.rounds} rounds; ${pinningDescription()}`,
    `machine: ${cpus().length} × ${cpus()[0]?.model.trim()}; load average (1, 5, 15 min) ` +
      `${loadBefore} before, ${loadAverage()} after`,
  ]);
  stopAll();
  closeConnections();
  rmSync(WORK, { recursive: true, force: true });
}
