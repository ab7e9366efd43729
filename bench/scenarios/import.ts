import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Api } from '../api.ts';
import {
  appendDataset,
  fullIncidentsDataset,
  generateDataset,
  IMPORT_ORDERS,
  importFile,
  withPostgresDatabase,
} from '../data.ts';
import { get } from '../http.ts';
import { addRow, fmt, log } from '../report.ts';
import { WORK } from '../settings.ts';
import { PAGE_ONE } from './ratio.ts';

/** The data set the import's targets are stated for: below it, the CLI's start-up weighs in. */
const TARGET_INCIDENTS = 1_000_000;
/** Issue 25: the import's peak RSS, at every size, both stores. */
const RSS_TARGET_MB = 256;
/** Issue 25: "flat", the spread of the peak RSS over the sizes imported, at most this share of the least. */
const RSS_FLAT_SHARE = 0.1;
const RATE_TARGETS = { SQLite: 150_000, PostgreSQL: 100_000 } as const;

/**
 * BENCH_IMPORT_SIZES: further data set sizes (comma-separated incident counts, e.g. `5000000`),
 * each imported after the store's own import into a store of its own, so that the peak RSS is seen
 * to stay flat as the file grows. Read here, the one place that uses it.
 */
const extraSizes = (process.env.BENCH_IMPORT_SIZES ?? '').split(',').flatMap((raw) => {
  if (raw.trim() === '') return [];
  if (!/^[1-9]\d*$/.test(raw.trim()))
    throw new Error(`BENCH_IMPORT_SIZES must list positive integers (got "${raw}")`);
  return [Number(raw)];
});

type StoreLabel = keyof typeof RATE_TARGETS;

/** One import with the real CLI, reported: its rate (judged from a million) and its peak RSS. */
async function measured(label: StoreLabel, file: string, incidents: number, env: Record<string, string>) {
  log(`importing ${fmt(incidents)} incidents into ${label}`);
  const imported = await importFile(file, env);
  const rate = incidents / imported.seconds;
  const judged = incidents >= TARGET_INCIDENTS;
  const rateTarget = `>= ${fmt(RATE_TARGETS[label])}/s`;
  addRow({
    measurement: `${label}: import ${fmt(incidents)} incidents from NDJSON (whole CLI run)`,
    result: `${fmt(imported.seconds, 1)} s = ${fmt(rate)} incidents/s`,
    target: judged ? rateTarget : `report (${rateTarget} is for ${fmt(TARGET_INCIDENTS)})`,
    pass: judged ? rate >= RATE_TARGETS[label] : null,
  });
  addRow({
    measurement: `${label}: import ${fmt(incidents)} incidents, peak RSS of the CLI`,
    result: `${fmt(imported.rssMb)} MB`,
    target: `< ${RSS_TARGET_MB} MB`,
    pass: imported.rssMb < RSS_TARGET_MB,
  });
  return imported.rssMb;
}

/**
 * Imports `file` (`incidents` incidents) with the real CLI into `env`'s store, then each of
 * BENCH_IMPORT_SIZES' larger sizes into a fresh store of the same kind (a file beside the bench's,
 * or a database of its own), and judges issue 25's targets: the rate from a million incidents, the
 * peak RSS at every size, and that it does not grow with the file.
 */
export async function importRate(file: string, incidents: number, env: Record<string, string>) {
  const sqlite = env.DATABASE_URL?.startsWith('sqlite:') === true;
  const label: StoreLabel = sqlite ? 'SQLite' : 'PostgreSQL';
  const peaks = [await measured(label, file, incidents, env)];
  for (const size of extraSizes.filter((extra) => extra > incidents)) {
    log(`generating ${fmt(size)} incidents`);
    const name = `import-${size}`;
    const data = await generateDataset(`${name}.ndjson`, size);
    try {
      const into = (url: string) => measured(label, data, size, { ...env, DATABASE_URL: url });
      peaks.push(
        await (sqlite ? into(`sqlite:${join(WORK, `${name}.db`)}`) : withPostgresDatabase(into, `_${size}`)),
      );
    } finally {
      rmSync(data, { force: true });
      rmSync(join(WORK, `${name}.db`), { force: true });
      rmSync(join(WORK, `${name}.db-wal`), { force: true });
      rmSync(join(WORK, `${name}.db-shm`), { force: true });
    }
  }
  if (peaks.length > 1) {
    const least = Math.min(...peaks);
    const growth = Math.max(...peaks) - least;
    addRow({
      measurement: `${label}: import peak RSS from ${fmt(incidents)} to ${fmt(Math.max(...extraSizes))} incidents`,
      result: `${peaks.map((mb) => fmt(mb)).join(' → ')} MB (spread ${fmt(growth)} MB)`,
      target: `flat: spread <= ${fmt(RSS_FLAT_SHARE * 100)}% of the least`,
      pass: growth <= RSS_FLAT_SHARE * least,
    });
  }
}

/** Imports ten more incidents while `api` runs: page 1 must report the new `total` at once. */
export async function totalAfterImport(api: Api, incidents: number, env: Record<string, string>) {
  log('importing 10 more incidents while the server runs');
  await importFile(await appendDataset(10), env);
  const after = JSON.parse((await get(api.port, PAGE_ONE, api.auth)).body.toString('utf8'));
  addRow({
    measurement: '`total` right after an import (from the account row, no COUNT)',
    result: fmt(after.data.pagination.total),
    target: fmt(incidents + 10),
    pass: after.data.pagination.total === incidents + 10,
  });
}

/** Issue 39: the slowest order's rate, at least this share of the rate oldest first. */
const ORDER_RATE_SHARE = 0.8;

/**
 * Issue 39: imports a file of `incidents` incidents with every field set (`fullIncidentsDataset`)
 * oldest first, newest first (the order of every list and export) and shuffled, each into a fresh
 * store of `label`'s kind, with the real CLI; reports each one's rate, CPU time and peak RSS side
 * by side with their ratios to oldest first, and judges the peak RSS (< 256 MB) and the rates
 * (every order within 20% of oldest first).
 */
export async function importOrders(label: StoreLabel, incidents: number) {
  let oldest: { rate: number; rssMb: number } | null = null;
  for (const [index, order] of IMPORT_ORDERS.entries()) {
    log(`generating ${fmt(incidents)} full-field incidents, ${order}`);
    const data = await fullIncidentsDataset(`orders-${index}.ndjson`, incidents, order);
    try {
      const into = async (url: string) => {
        log(`importing them into ${label}`);
        const imported = await importFile(data, { DATABASE_URL: url });
        const rate = incidents / imported.seconds;
        oldest ??= { rate, rssMb: imported.rssMb };
        const ratio = (value: number, base: number) =>
          index === 0 ? '' : ` (${fmt((value / base) * 100)}% of oldest first)`;
        addRow({
          measurement: `${label}: import ${fmt(incidents)} full-field incidents, ${order} (whole CLI run)`,
          result: `${fmt(imported.seconds, 1)} s = ${fmt(rate)} incidents/s${ratio(rate, oldest.rate)}, ${fmt(imported.cpuSeconds, 1)} s CPU`,
          target: index === 0 ? 'report' : `>= ${fmt(ORDER_RATE_SHARE * 100)}% of oldest first`,
          pass: index === 0 ? null : rate >= ORDER_RATE_SHARE * oldest.rate,
        });
        addRow({
          measurement: `${label}: import ${fmt(incidents)} full-field incidents, ${order}, peak RSS of the CLI`,
          result: `${fmt(imported.rssMb)} MB${ratio(imported.rssMb, oldest.rssMb)}`,
          target: `< ${RSS_TARGET_MB} MB`,
          pass: imported.rssMb < RSS_TARGET_MB,
        });
      };
      if (label === 'SQLite') {
        const db = join(WORK, `orders-${index}.db`);
        try {
          await into(`sqlite:${db}`);
        } finally {
          for (const suffix of ['', '-wal', '-shm']) rmSync(`${db}${suffix}`, { force: true });
        }
      } else {
        await withPostgresDatabase(into, `_orders_${index}`);
      }
    } finally {
      rmSync(data, { force: true });
    }
  }
}
