import type { Api } from '../api.ts';
import { get } from '../http.ts';
import { addRow, fmt, log, median } from '../report.ts';
import { settings } from '../settings.ts';
import { failures, load } from '../wrk.ts';
import { PAGE_ONE } from './ratio.ts';

/** Median latency of the first (uncached) read of `count` pages from `from`, on one connection. */
export async function coldPages(api: Api, from: number, count: number): Promise<number> {
  const latencies: number[] = [];
  for (let page = from; page < from + count; page += 1) {
    const res = await get(api.port, `/api/v1/public/incidents?page=${page}&limit=50`, api.auth);
    if (res.status !== 200) throw new Error(`page ${page} answered ${res.status}`);
    latencies.push(res.ms);
  }
  return median(latencies);
}

/**
 * A deep page must cost no more than twice page 1: first uncached reads at the start, middle and
 * end of `incidents`, then the (cached) last page against page 1 under load. Returns the load runs.
 */
export async function depth(api: Api, incidents: number) {
  log('median latency of uncached pages: first, middle, last');
  const lastPage = Math.ceil(incidents / 50);
  const span = Math.min(200, Math.floor(lastPage / 3));
  const first = await coldPages(api, 1, span);
  const middle = await coldPages(api, Math.floor(lastPage / 2), span);
  const last = await coldPages(api, lastPage - span + 1, span);
  addRow({
    measurement: `median latency, page 1..${span} (uncached, one connection)`,
    result: `${fmt(first, 2)} ms`,
    target: 'reference',
    pass: null,
  });
  for (const [name, ms] of [
    [`middle pages from ${Math.floor(lastPage / 2)}`, middle],
    [`last pages up to ${lastPage}`, last],
  ] as const) {
    addRow({
      measurement: `median latency, ${name}, vs page 1`,
      result: `${fmt(ms, 2)} ms = ${fmt(ms / first, 2)}x`,
      target: '<= 2x',
      pass: ms / first <= 2,
    });
  }

  const seconds = Math.max(3, Math.round(settings.seconds / 2));
  const lastPath = `/api/v1/public/incidents?page=${lastPage}&limit=50`;
  const cachedLast = await load(api.pid, api.port, lastPath, api.auth, { seconds });
  const cachedFirst = await load(api.pid, api.port, PAGE_ONE, api.auth, { seconds });
  const failed = failures([cachedLast, cachedFirst]);
  addRow({
    measurement: `median latency under load (${settings.connections} connections), last page vs page 1`,
    result: `${fmt(cachedLast.latencyMs.p50, 2)} vs ${fmt(cachedFirst.latencyMs.p50, 2)} ms (p99 ${fmt(cachedLast.latencyMs.p99, 2)} vs ${fmt(cachedFirst.latencyMs.p99, 2)} ms)${failed > 0 ? `; ${failed} failed requests!` : ''}`,
    target: '<= 2x',
    // Under 1 ms a 2x bound is within the timer's noise: 1 ms is the floor of the comparison.
    pass: failed === 0 && cachedLast.latencyMs.p50 <= 2 * Math.max(cachedFirst.latencyMs.p50, 1),
  });
  return [cachedLast, cachedFirst];
}
