import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Api, nextPort } from '../api.ts';
import { get } from '../http.ts';
import { startServer, stop } from '../processes.ts';
import { addRow, fmt, log, spread } from '../report.ts';
import { ROOT, settings, WORK } from '../settings.ts';
import type { StoreCounter } from '../stores.ts';
import { failures, type LoadResult, load } from '../wrk.ts';

export const PAGE_ONE = '/api/v1/public/incidents?limit=50';

/**
 * Below this share of one core, the bare server was not the limit of its own run: wrk or the
 * neighbours on the machine were, and a ratio against it is not a measure of the API (the bare
 * figure is too low, so the ratio is usually too high).
 */
export const CPU_BOUND_PERCENT = 90;

/**
 * Page-1 throughput of the API against a bare node:http server answering the same bytes and
 * headers (bench/bare-server.ts), alternately, `settings.rounds` rounds each, so that both see the
 * same machine; between them, the same bytes sent by Fastify alone (bench/fastify-floor-server.ts),
 * the floor of any Fastify application. Best round and spread of each; the server CPU time per
 * request beside the ratio (what the code costs, which the neighbours' load moves much less than
 * the throughput); and the bare server's CPU use, which says whether it, not the load generator or
 * the machine, set its pace.
 * `target`: the least share of the bare server's throughput the API must reach. `counters`: what
 * the stores count (transactions, commands), read before the first counted API round and after the
 * last one, and reported per API request of those rounds (the bare and Fastify-alone rounds
 * between them touch no store).
 */
export async function pageOneRatio(label: string, api: Api, target: number, counters: StoreCounter[] = []) {
  const first = await get(api.port, PAGE_ONE, api.auth);
  if (first.status !== 200) throw new Error(`page 1 answered ${first.status}`);
  const bodyPath = join(WORK, `page-one-${api.port}.json`);
  writeFileSync(bodyPath, first.body);
  const sameHeaders = Object.fromEntries(
    [
      'content-type',
      'etag',
      'x-ratelimit-limit',
      'x-ratelimit-remaining',
      'x-ratelimit-reset',
      'x-request-id',
    ].map((name) => [name, first.headers[name] as string]),
  );
  // The bare server's arguments but its port: the instruction count starts one of its own.
  const bareArgs = (port: number) => [
    join(ROOT, 'bench/bare-server.ts'),
    bodyPath,
    JSON.stringify(sameHeaders),
    String(port),
  ];
  const barePort = nextPort();
  const bare = await startServer(
    bareArgs(barePort),
    {},
    async () => (await get(barePort, '/')).status === 200,
  );
  const floorPort = nextPort();
  const floor = await startServer(
    [
      join(ROOT, 'bench/fastify-floor-server.ts'),
      bodyPath,
      JSON.stringify(sameHeaders),
      String(floorPort),
      PAGE_ONE.split('?')[0] as string,
    ],
    {},
    async () => (await get(floorPort, PAGE_ONE)).status === 200,
  );

  log(
    `${label}: page 1, bare node:http, Fastify alone and the API in turn, ${settings.seconds} s each, ${settings.rounds} rounds`,
  );
  const bareRuns: LoadResult[] = [];
  const floorRuns: LoadResult[] = [];
  const apiRuns: LoadResult[] = [];
  try {
    // Unreported warm-up: V8's optimised code, the store's connections and the caches are in place
    // before the first counted round, so that round one does not measure start-up.
    await load(bare.pid, barePort, PAGE_ONE, {}, { seconds: 1 });
    await load(floor.pid, floorPort, PAGE_ONE, {}, { seconds: 1 });
    await load(api.pid, api.port, PAGE_ONE, api.auth, { seconds: 1 });
    const before = await Promise.all(counters.map((c) => c.read()));
    for (let round = 0; round < settings.rounds; round += 1) {
      bareRuns.push(await load(bare.pid, barePort, PAGE_ONE, {}));
      floorRuns.push(await load(floor.pid, floorPort, PAGE_ONE, {}));
      apiRuns.push(await load(api.pid, api.port, PAGE_ONE, api.auth));
    }
    const after = await Promise.all(counters.map((c) => c.read()));
    const requests = apiRuns.reduce((n, r) => n + r.requests, 0);
    counters.forEach((counter, i) => {
      const used = (after[i] as number) - (before[i] as number);
      addRow({
        measurement: `${label}: ${counter.name} per page-1 request, over the ${settings.rounds} API rounds`,
        result: `${fmt(used / requests, 5)} (${fmt(used)} for ${fmt(requests)} requests${counter.breakdown ? `: ${counter.breakdown(requests)}` : ''})`,
        target: counter.below === undefined ? 'report' : `< ${counter.below}`,
        pass: counter.below === undefined ? null : used / requests < counter.below,
      });
    });
  } finally {
    await stop(bare);
    await stop(floor);
  }

  const best = (runs: LoadResult[]) => runs.reduce((a, b) => (b.rps > a.rps ? b : a));
  const bareBest = best(bareRuns);
  const apiBest = best(apiRuns);
  const ratio = apiBest.rps / bareBest.rps;
  const failed = failures([...apiRuns, ...floorRuns, ...bareRuns]);
  const bareBound = bareBest.cpuPercent >= CPU_BOUND_PERCENT;
  const notes = [
    `rounds: API ${spread(apiRuns.map((r) => r.rps))}, bare ${spread(bareRuns.map((r) => r.rps))}`,
    ...(bareBound
      ? []
      : [
          `bare server at ${fmt(bareBest.cpuPercent)}% of a core, not CPU-bound: wrk or the machine set the pace; ratio not judged`,
        ]),
    ...(failed > 0 ? [`${failed} failed requests!`] : []),
  ];
  addRow({
    measurement: `${label}: page 1 req/s, API vs bare node:http (same bytes, ${first.body.length} B), best of ${settings.rounds}`,
    result: `${fmt(apiBest.rps)} vs ${fmt(bareBest.rps)} = ${fmt(ratio * 100)}% (${notes.join('; ')})`,
    target: `>= ${fmt(target * 100)}%`,
    pass: failed > 0 ? false : bareBound ? ratio >= target : null,
  });

  const apiCpu = Math.min(...apiRuns.map((r) => r.cpuUsPerRequest));
  const bareCpu = Math.min(...bareRuns.map((r) => r.cpuUsPerRequest));
  addRow({
    measurement: `${label}: page 1 server CPU per request, API vs bare node:http, least of ${settings.rounds}`,
    result: `${fmt(apiCpu)} vs ${fmt(bareCpu)} µs = ${fmt(apiCpu / bareCpu, 2)}x (rounds: API ${spread(apiRuns.map((r) => r.cpuUsPerRequest))}, bare ${spread(bareRuns.map((r) => r.cpuUsPerRequest))} µs)`,
    target: 'report',
    pass: null,
  });
  const floorCpu = Math.min(...floorRuns.map((r) => r.cpuUsPerRequest));
  addRow({
    measurement: `${label}: page 1 server CPU per request, Fastify alone (one route, its logger) vs bare node:http, least of ${settings.rounds}`,
    result: `${fmt(floorCpu)} vs ${fmt(bareCpu)} µs: Fastify alone at ${fmt((100 * bareCpu) / floorCpu)}% of the bare server's, the API at ${fmt((100 * bareCpu) / apiCpu)}% (rounds: ${spread(floorRuns.map((r) => r.cpuUsPerRequest))} µs)`,
    target: 'report',
    pass: null,
  });
  addRow({
    measurement: `${label}: server CPU use during the page 1 runs, % of one core`,
    result: `bare ${spread(bareRuns.map((r) => r.cpuPercent))}%, Fastify alone ${spread(floorRuns.map((r) => r.cpuPercent))}%, API ${spread(apiRuns.map((r) => r.cpuPercent))}%`,
    target: `bare >= ${CPU_BOUND_PERCENT}% (CPU-bound)`,
    pass: bareBound,
  });
  return { etag: first.headers.etag as string, apiRuns, apiCpuUsPerRequest: apiCpu, bareArgs };
}
