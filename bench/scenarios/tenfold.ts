import { existsSync, statSync } from 'node:fs';
import pg from 'pg';
import { type Api, startApi } from '../api.ts';
import { importFile } from '../data.ts';
import { stop } from '../processes.ts';
import { addRow, fmt, log } from '../report.ts';
import { settings } from '../settings.ts';
import { coldPages } from './depth.ts';
import { rate as exportRate, startExport } from './export.ts';
import { walkFeed } from './feed.ts';

/**
 * Issue 25, target 4 (`BENCH_ONLY=tenfold`): a store of ten times the incidents against one of
 * the usual size, side by side in one run, each imported by the real CLI from the same generated
 * files and then read by the real server: the import rate, the disk per million incidents, the
 * median of uncached reads of page 1 and of the last pages, the export rate and the feed rate.
 * Each figure of the large store must be within 20% of the small one's.
 */

/** Pages read uncached at each end: their median is the page's latency. */
const PAGES = 200;
/** "Within 20%": the large store's latency at most this times the small one's, its rate at least 1 / this. */
const WITHIN = 1.2;

export interface StoreUnderTest {
  incidents: number;
  env: Record<string, string>;
  /** Bytes the store takes on disk, once the server has stopped. */
  diskBytes(): Promise<number>;
}

interface Figures {
  incidents: number;
  importRate: number;
  importRssMb: number;
  diskMb: number;
  pageOneMs: number;
  lastPagesMs: number;
  exportRate: number;
  feedRate: number;
}

async function measure(label: string, store: StoreUnderTest, file: string): Promise<Figures> {
  log(`${label}: importing ${fmt(store.incidents)} incidents`);
  const imported = await importFile(file, store.env);
  const api: Api = await startApi(`${label} ${store.incidents}`, store.env, settings.serverNodeOptions);
  try {
    log(`${label} at ${fmt(store.incidents)}: pages, export, feed`);
    const lastPage = Math.ceil(store.incidents / 50);
    const pageOneMs = await coldPages(api, 1, PAGES);
    const lastPagesMs = await coldPages(api, lastPage - PAGES + 1, PAGES);
    const exported = await startExport(api).done;
    if (exported.lines !== store.incidents) throw new Error(`the export had ${exported.lines} rows`);
    const feed = await walkFeed(api);
    if (feed.changes < store.incidents) throw new Error(`the feed had ${feed.changes} changes`);
    return {
      incidents: store.incidents,
      importRate: store.incidents / imported.seconds,
      importRssMb: imported.rssMb,
      diskMb: 0,
      pageOneMs,
      lastPagesMs,
      exportRate: exportRate(exported),
      feedRate: feed.changes / feed.seconds,
    };
  } finally {
    await stop(api.process);
  }
}

/** Measures `small` then `large` (each imported from its own file) and reports them side by side. */
export async function tenfold(
  label: string,
  small: StoreUnderTest,
  large: StoreUnderTest,
  files: { small: string; large: string },
): Promise<void> {
  const figures: Figures[] = [];
  for (const [store, file] of [
    [small, files.small],
    [large, files.large],
  ] as const) {
    const measured = await measure(label, store, file);
    figures.push({ ...measured, diskMb: (await store.diskBytes()) / 1024 / 1024 });
  }
  const [s, l] = figures as [Figures, Figures];
  const sizes = `${fmt(l.incidents)} vs ${fmt(s.incidents)}`;
  const latency = (name: string, large: number, smaller: number) =>
    addRow({
      measurement: `${label}: ${name}, ${sizes} incidents (median of ${PAGES} uncached reads, one connection)`,
      result: `${fmt(large, 2)} vs ${fmt(smaller, 2)} ms = ${fmt(large / smaller, 2)}x`,
      target: `<= ${WITHIN}x`,
      pass: large <= WITHIN * smaller,
    });
  const rateRow = (name: string, large: number, smaller: number, unit: string) =>
    addRow({
      measurement: `${label}: ${name}, ${sizes} incidents`,
      result: `${fmt(large)} vs ${fmt(smaller)} ${unit} = ${fmt(large / smaller, 2)}x`,
      target: `>= ${fmt(1 / WITHIN, 2)}x`,
      pass: large >= smaller / WITHIN,
    });
  rateRow('import rate (whole CLI run)', l.importRate, s.importRate, 'incidents/s');
  addRow({
    measurement: `${label}: import peak RSS of the CLI, ${sizes} incidents`,
    result: `${fmt(l.importRssMb)} vs ${fmt(s.importRssMb)} MB`,
    target: 'report (judged by the import scenario)',
    pass: null,
  });
  latency('page 1', l.pageOneMs, s.pageOneMs);
  latency('the last pages', l.lastPagesMs, s.lastPagesMs);
  rateRow('export as NDJSON, alone', l.exportRate, s.exportRate, 'rows/s');
  rateRow('feed catch-up from no cursor, limit=1000', l.feedRate, s.feedRate, 'changes/s');
  addRow({
    measurement: `${label}: disk per million incidents after the import (the whole store: data, indexes, feed)`,
    result: `${fmt((l.diskMb * 1_000_000) / l.incidents)} MB at ${fmt(l.incidents)}, ${fmt((s.diskMb * 1_000_000) / s.incidents)} MB at ${fmt(s.incidents)} (${fmt(l.diskMb)} and ${fmt(s.diskMb)} MB in all)`,
    target: 'report',
    pass: null,
  });
}

/** A SQLite store: the database file and its WAL. */
export function sqliteStore(incidents: number, path: string): StoreUnderTest {
  return {
    incidents,
    env: { DATABASE_URL: `sqlite:${path}` },
    async diskBytes() {
      return [path, `${path}-wal`].reduce(
        (sum, file) => sum + (existsSync(file) ? statSync(file).size : 0),
        0,
      );
    },
  };
}

/** A PostgreSQL store: its database's size as PostgreSQL counts it (tables, indexes, TOAST). */
export function postgresStore(incidents: number, url: string, redisUrl: string): StoreUnderTest {
  return {
    incidents,
    env: { DATABASE_URL: url, REDIS_URL: redisUrl },
    async diskBytes() {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const { rows } = await client.query<{ size: string }>(
          'select pg_database_size(current_database()) as size',
        );
        return Number(rows[0]?.size ?? 0);
      } finally {
        await client.end();
      }
    },
  };
}
