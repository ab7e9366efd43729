import type { Api } from '../api.ts';
import { appendDataset, importFile } from '../data.ts';
import { get } from '../http.ts';
import { addRow, fmt, log } from '../report.ts';
import { PAGE_ONE } from './ratio.ts';

/** The data set the import's rate target is stated for: below it, the CLI's start-up weighs in. */
const RATE_TARGET_INCIDENTS = 1_000_000;

/**
 * Imports `file` (`incidents` incidents) with the real CLI into `env`'s store. `withTargets`:
 * the issue's targets apply (embedded SQLite: the rate, on a data set of a million incidents or
 * more, and a peak RSS that does not grow with the file); otherwise the rate is reported.
 */
export async function importRate(
  label: string,
  file: string,
  incidents: number,
  env: Record<string, string>,
  withTargets: boolean,
) {
  log(`importing ${fmt(incidents)} incidents into ${label}`);
  const imported = await importFile(file, env);
  const rate = incidents / imported.seconds;
  const judged = withTargets && incidents >= RATE_TARGET_INCIDENTS;
  addRow({
    measurement: `${label}: import ${fmt(incidents)} incidents from NDJSON (whole CLI run)`,
    result: `${fmt(imported.seconds, 1)} s = ${fmt(rate)} incidents/s`,
    target: judged
      ? '>= 50,000/s'
      : withTargets
        ? `report (>= 50,000/s is for ${fmt(RATE_TARGET_INCIDENTS)})`
        : 'report',
    pass: judged ? rate >= 50_000 : null,
  });
  if (withTargets) {
    addRow({
      measurement: `${label}: import peak RSS`,
      result: `${fmt(imported.rssMb)} MB`,
      target: 'flat with file size',
      pass: null,
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
