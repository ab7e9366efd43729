import type { Api } from '../api.ts';
import { get } from '../http.ts';
import { addRow, fmt, log, median } from '../report.ts';

const LIMIT = 1000;
/** Pages at each end whose median latency compares: one page alone is at the mercy of a noisy machine. */
const ENDS = 10;

/** Changes on a page: each one is an object that begins with its seq (DESIGN.md, "Changes feed"). */
function countChanges(body: Buffer): number {
  let count = 0;
  for (let at = body.indexOf('{"seq":'); at !== -1; at = body.indexOf('{"seq":', at + 1)) count += 1;
  return count;
}

/**
 * Issue 12's feed targets: a catch-up from no cursor at limit=1000, following `next_cursor` until
 * `has_more` is false, on one kept-alive connection: changes/s, and the median latency of the last
 * full pages against the first. The client reads only what it needs to go on (the cursor at the
 * end of the body) and counts the changes, so that the rate is the server's, not JSON.parse's.
 * Then the same walk again, reported beside it. `withTargets`: the embedded SQLite targets apply to
 * the first walk; otherwise the figures are reported.
 */
export async function feedCatchUp(label: string, api: Api, incidents: number, withTargets: boolean) {
  log(`${label}: feed catch-up from no cursor, limit=${LIMIT}`);
  const { changes, seconds, latencies } = await walkFeed(api);
  const rate = changes / seconds;
  addRow({
    measurement: `${label}: feed catch-up from no cursor, limit=${LIMIT}, one connection, until has_more is false`,
    result: `${fmt(changes)} changes in ${fmt(seconds, 1)} s = ${fmt(rate)} changes/s`,
    target: `${withTargets ? '>= 100,000/s, ' : ''}at least every incident (${fmt(incidents)})`,
    pass: changes >= incidents && (!withTargets || rate >= 100_000),
  });
  const first = median(latencies.slice(0, ENDS));
  const last = median(latencies.slice(-ENDS));
  addRow({
    measurement: `${label}: feed: median latency of the last ${ENDS} full pages vs the first ${ENDS}`,
    result: `${fmt(last, 2)} vs ${fmt(first, 2)} ms = ${fmt(last / first, 2)}x (all ${fmt(latencies.length)} full pages: median ${fmt(median(latencies), 2)} ms)`,
    target: withTargets ? '<= 2x' : 'report',
    pass: withTargets ? last <= 2 * first : null,
  });
  // The first walk runs the feed's code cold (the server, and this client, compile it as they go);
  // a server that has served the feed before answers as the second does.
  log(`${label}: the same catch-up again`);
  const again = await walkFeed(api);
  addRow({
    measurement: `${label}: the same feed catch-up again, right after the first`,
    result: `${fmt(again.changes)} changes in ${fmt(again.seconds, 1)} s = ${fmt(again.changes / again.seconds)} changes/s`,
    target: 'report',
    pass: null,
  });
}

/**
 * The whole feed from no cursor at limit=1000 on one kept-alive connection, following `next_cursor`
 * until `has_more` is false: the changes, the time, and the latency of every full page.
 */
export async function walkFeed(api: Api): Promise<{ changes: number; seconds: number; latencies: number[] }> {
  const latencies: number[] = [];
  let changes = 0;
  let cursor: string | null = null;
  const started = performance.now();
  for (;;) {
    const query: string = cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`;
    const res = await get(api.port, `/api/v1/public/changes?limit=${LIMIT}${query}`, api.auth);
    if (res.status !== 200)
      throw new Error(`page ${latencies.length + 1} of the feed answered ${res.status}`);
    const onPage = countChanges(res.body);
    changes += onPage;
    // `next_cursor` and `has_more` end the body; a cursor is base64url, so no escaping to undo.
    const tail = res.body.subarray(-1024).toString('utf8');
    const next = /"next_cursor":"([^"]*)","has_more":(true|false)\}\}$/.exec(tail);
    if (next === null) throw new Error(`page ${latencies.length + 1} of the feed ends unexpectedly: ${tail}`);
    if (onPage === LIMIT) latencies.push(res.ms);
    if (next[2] === 'false') break;
    cursor = next[1] as string;
  }
  return { changes, seconds: (performance.now() - started) / 1000, latencies };
}
