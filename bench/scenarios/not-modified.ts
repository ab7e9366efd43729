import type { Api } from '../api.ts';
import { get } from '../http.ts';
import { addRow, fmt, log } from '../report.ts';
import { load } from '../wrk.ts';
import { PAGE_ONE } from './ratio.ts';

/**
 * If-None-Match with page 1's current ETag under load: every answer must be a 304, and a 304 must
 * not count against the hourly allowance (the rate-limit header proves it). wrk counts statuses in
 * this run only, which costs wrk CPU: the server's CPU per request, not the throughput, is what
 * compares with the 200s (`pageOneCpuUs`).
 */
export async function notModified(api: Api, etag: string, pageOneCpuUs: number) {
  log('304 throughput');
  const conditional = { ...api.auth, 'if-none-match': etag };
  const run = await load(api.pid, api.port, PAGE_ONE, conditional, { countStatuses: true });
  const remainingBefore = Number((await get(api.port, PAGE_ONE, api.auth)).headers['x-ratelimit-remaining']);
  await get(api.port, PAGE_ONE, conditional);
  const remainingAfter = Number((await get(api.port, PAGE_ONE, api.auth)).headers['x-ratelimit-remaining']);
  const notModifiedCount = run.statuses['304'] ?? 0;
  const allNotModified = run.requests > 0 && notModifiedCount === run.requests && run.socketErrors === 0;
  addRow({
    measurement: 'If-None-Match with the current ETag: 304 req/s, uncounted',
    result:
      `${fmt(run.rps)} req/s, ${fmt(notModifiedCount)} of ${fmt(run.requests)} answers 304; ` +
      `server CPU ${fmt(run.cpuUsPerRequest)} µs a 304 vs ${fmt(pageOneCpuUs)} µs a 200 ` +
      `(server at ${fmt(run.cpuPercent)}% of a core); ` +
      `a 304 cost ${remainingBefore - remainingAfter - 1} requests of the allowance`,
    target: 'all 304, not counted',
    pass: allNotModified && remainingBefore - remainingAfter === 1,
  });
  return run;
}
