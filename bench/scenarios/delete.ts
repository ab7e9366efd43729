import type { Api } from '../api.ts';
import { deletionDataset, importFile } from '../data.ts';
import { get } from '../http.ts';
import { pagePlans } from '../query-plan.ts';
import { addRow, fmt, log } from '../report.ts';
import { failures, load } from '../wrk.ts';
import { coldPages } from './depth.ts';
import { PAGE_ONE } from './ratio.ts';

const DELETIONS = 10_000;
const LIMIT = 50;
/** Uncached pages read at each end, before and after: fewer than depth's, the store is the same. */
const SPAN = 100;
/** Each wrk run on page 1 or the last page, in seconds. */
const LOAD_SECONDS = 3;
const INDEX = 'incidents_account_position';

const total = async (api: Api): Promise<number> =>
  JSON.parse((await get(api.port, PAGE_ONE, api.auth)).body.toString('utf8')).data.pagination.total;

/**
 * Page 1 and the last page: the median of the first (uncached) reads of SPAN pages at each end on
 * one connection, then each under wrk load (served mostly from the response cache).
 */
async function pageTimes(api: Api) {
  const lastPage = Math.ceil((await total(api)) / LIMIT);
  const first = await coldPages(api, 1, SPAN);
  const last = await coldPages(api, lastPage - SPAN + 1, SPAN);
  const lastPath = `/api/v1/public/incidents?page=${lastPage}&limit=${LIMIT}`;
  const loadedFirst = await load(api.pid, api.port, PAGE_ONE, api.auth, { seconds: LOAD_SECONDS });
  const loadedLast = await load(api.pid, api.port, lastPath, api.auth, { seconds: LOAD_SECONDS });
  return { lastPage, first, last, loadedFirst, loadedLast };
}

/**
 * Issue 12's deletion target: `DELETIONS` random incidents of the account deleted in one import
 * (`"deleted": true` records, the real CLI): its time; the plans of the statements page 1 and the
 * last page run afterwards (the page read must be a range read of INDEX with no temporary b-tree);
 * and both pages timed before and after, side by side. SQLite: the plans are SQLite's.
 */
export async function deleteIncidents(
  api: Api,
  dataFile: string,
  databaseUrl: string,
  env: Record<string, string>,
) {
  const file = await deletionDataset(dataFile, DELETIONS);
  const before = await total(api);
  log(`pages 1 and last before deleting ${fmt(DELETIONS)} incidents`);
  const timesBefore = await pageTimes(api);
  log(`deleting ${fmt(DELETIONS)} random incidents in one import`);
  const imported = await importFile(file, env);
  const after = await total(api);
  addRow({
    measurement: `delete ${fmt(DELETIONS)} random incidents of ${fmt(before)} in one import (whole CLI run)`,
    result: `${fmt(imported.seconds, 2)} s, peak RSS ${fmt(imported.rssMb)} MB; total ${fmt(before)} → ${fmt(after)}`,
    target: `report; total − ${fmt(DELETIONS)}`,
    pass: after === before - DELETIONS,
  });

  const lastOffset = (Math.ceil(after / LIMIT) - 1) * LIMIT;
  for (const [name, offset] of [
    ['page 1', 0],
    ['last page', lastOffset],
  ] as const) {
    const plans = await pagePlans(databaseUrl, offset, LIMIT);
    const page = plans.find((p) => /order by "position" desc/.test(p.sql));
    if (page === undefined) throw new Error(`no page query among ${plans.map((p) => p.sql).join('; ')}`);
    const rangeRead =
      page.plan.some((d) => d.includes(INDEX)) && !page.plan.some((d) => d.includes('TEMP B-TREE'));
    const others = plans
      .filter((p) => p !== page)
      .map((p) => `${p.sql.replace(/^select .* from/, 'select … from')} → ${p.plan.join(' / ')}`);
    addRow({
      measurement: `after the deletions, ${name}: EXPLAIN QUERY PLAN of the page query (parameters ${page.parameters.join(', ')})`,
      result: `${page.plan.join(' / ')}${others.length > 0 ? `; also ran: ${others.join('; ')}` : ''}`,
      target: `${INDEX}, no temp b-tree`,
      pass: rangeRead,
    });
  }

  log(`pages 1 and last after deleting ${fmt(DELETIONS)} incidents`);
  const timesAfter = await pageTimes(api);
  for (const [name, pick] of [
    ['page 1', (t: typeof timesBefore) => [t.first, t.loadedFirst] as const],
    ['last page', (t: typeof timesBefore) => [t.last, t.loadedLast] as const],
  ] as const) {
    const [coldBefore, loadedBefore] = pick(timesBefore);
    const [coldAfter, loadedAfter] = pick(timesAfter);
    const failed = failures([loadedBefore, loadedAfter]);
    addRow({
      measurement: `${name} (${name === 'page 1' ? 1 : `${timesBefore.lastPage} → ${timesAfter.lastPage}`}) after the deletions vs before: median of ${SPAN} uncached reads at that end; wrk ${LOAD_SECONDS} s`,
      result:
        `uncached ${fmt(coldAfter, 2)} vs ${fmt(coldBefore, 2)} ms = ${fmt(coldAfter / coldBefore, 2)}x; ` +
        `wrk p50 ${fmt(loadedAfter.latencyMs.p50, 2)} vs ${fmt(loadedBefore.latencyMs.p50, 2)} ms, ` +
        `p99 ${fmt(loadedAfter.latencyMs.p99, 2)} vs ${fmt(loadedBefore.latencyMs.p99, 2)} ms, ` +
        `${fmt(loadedAfter.rps)} vs ${fmt(loadedBefore.rps)} req/s ` +
        `(server at ${fmt(loadedAfter.cpuPercent)}% / ${fmt(loadedBefore.cpuPercent)}% of a core)` +
        `${failed > 0 ? `; ${failed} failed requests!` : ''}`,
      target: 'report',
      pass: failed > 0 ? false : null,
    });
  }
}
