import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import type { Api } from '../api.ts';
import { get } from '../http.ts';
import { cpuMicros, pinned, sampleMemory } from '../processes.ts';
import { addRow, fmt, log } from '../report.ts';
import { ROOT } from '../settings.ts';
import { failures, type LoadResult, load } from '../wrk.ts';
import { CPU_BOUND_PERCENT, PAGE_ONE } from './ratio.ts';

const EXPORT_PATH = '/api/v1/public/exports/incidents.ndjson';

interface Download {
  status: number;
  cursor: string | null;
  bytes: number;
  lines: number;
  seconds: number;
}

interface ExportRun extends Download {
  /** The server's RSS before the export and its highest sample while it streamed. */
  beforeMb: number;
  peakMb: number;
  /** The server's CPU time over the export's wall time: 100 is one core busy all the time. */
  cpuPercent: number;
}

/**
 * One export of every incident by bench/download.ts (its own process, on the load generator's
 * CPUs), with the server's RSS sampled while it streams. `sending` settles when the client sends
 * its request, `done` with the export's figures.
 */
export function startExport(api: Api) {
  const [command, args] = pinned('loadGenerator', process.execPath, [
    join(ROOT, 'bench/download.ts'),
    String(api.port),
    EXPORT_PATH,
  ]);
  const child = spawn(command, args, {
    env: { ...process.env, BENCH_AUTHORIZATION: api.auth.authorization },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  // Set when the client sends its request: the server's RSS and CPU time are counted from then.
  let sampling: { memory: ReturnType<typeof sampleMemory>; cpuBefore: number; started: number } | null = null;
  const sending = new Promise<void>((resolve) => {
    child.stdout.on('data', (d) => {
      out += d;
      if (sampling === null && out.startsWith('sending\n')) {
        sampling = {
          memory: sampleMemory(api.pid),
          cpuBefore: cpuMicros(api.pid),
          started: performance.now(),
        };
        resolve();
      }
    });
  });
  const done = (async (): Promise<ExportRun> => {
    const [code] = await once(child, 'close');
    const line = out.split('\n')[1];
    if (code !== 0 || line === undefined || line === '')
      throw new Error(`the export client failed (exit code ${code}): ${out}`);
    await sending;
    const { memory, cpuBefore, started } = sampling!;
    const cpu = cpuMicros(api.pid) - cpuBefore;
    const wallUs = (performance.now() - started) * 1000;
    const download = JSON.parse(line) as Download;
    if (download.status !== 200) throw new Error(`the export answered ${download.status}`);
    return { ...download, ...memory.stop(), cpuPercent: (cpu / wallUs) * 100 };
  })();
  return { sending, done };
}

export const rate = (run: ExportRun) => run.lines / run.seconds;
const cpuNote = (percent: number) =>
  `server at ${fmt(percent)}% of a core${percent >= CPU_BOUND_PERCENT ? ', CPU-bound' : ', not CPU-bound: the machine or the client set the pace'}`;

/**
 * Issue 12's export targets: every incident as NDJSON alone (rows/s, the server's RSS growth),
 * then again while wrk loads page 1 for exactly as long as it streams, then page 1 alone for as
 * long: page 1's p99 beside the export and without it, side by side. `withTargets`: the embedded
 * SQLite targets apply; otherwise the figures are reported.
 */
export async function exportIncidents(label: string, api: Api, withTargets: boolean) {
  const page = await get(api.port, PAGE_ONE, api.auth);
  const incidents: number = JSON.parse(page.body.toString('utf8')).data.pagination.total;
  log(`${label}: exporting ${fmt(incidents)} incidents as NDJSON, alone, then beside page-1 load`);

  const alone = await startExport(api).done;
  const beside = startExport(api);
  await beside.sending;
  const underExport = await load(api.pid, api.port, PAGE_ONE, api.auth, { seconds: 600, until: beside.done });
  const loaded = await beside.done;
  const normal = await load(api.pid, api.port, PAGE_ONE, api.auth, {
    seconds: Math.max(1, Math.ceil(loaded.seconds)),
  });

  const growth = alone.peakMb - alone.beforeMb;
  addRow({
    measurement: `${label}: export ${fmt(incidents)} incidents as NDJSON, alone (a client process drops the body)`,
    result:
      `${fmt(alone.lines)} rows, ${fmt(alone.bytes / 1024 / 1024)} MB in ${fmt(alone.seconds, 2)} s = ` +
      `${fmt(rate(alone))} rows/s (${cpuNote(alone.cpuPercent)})`,
    target: withTargets ? '>= 250,000 rows/s, every row' : 'every row',
    pass: alone.lines === incidents && (!withTargets || rate(alone) >= 250_000),
  });
  addRow({
    measurement: `${label}: server RSS growth during that export (peak VmRSS sampled every 10 ms − before)`,
    result: `${fmt(growth, 1)} MB (${fmt(alone.beforeMb)} → ${fmt(alone.peakMb)} MB)`,
    target: withTargets ? '< 64 MB' : 'report',
    pass: withTargets ? growth < 64 : null,
  });
  const failed = failures([underExport, normal]);
  const describe = (run: LoadResult) =>
    `p99 ${fmt(run.latencyMs.p99, 2)} ms, p50 ${fmt(run.latencyMs.p50, 2)} ms, ${fmt(run.rps)} req/s`;
  addRow({
    measurement: `${label}: page 1 under wrk load while an export streams vs alone, as long as the export`,
    result:
      `beside the export: ${describe(underExport)}; alone: ${describe(normal)}; the export meanwhile ` +
      `${fmt(loaded.seconds, 2)} s = ${fmt(rate(loaded))} rows/s, server RSS +${fmt(loaded.peakMb - loaded.beforeMb, 1)} MB ` +
      `(${cpuNote(underExport.cpuPercent)}; alone ${fmt(normal.cpuPercent)}%)` +
      `${failed > 0 ? `; ${failed} failed requests!` : ''}`,
    target: 'report',
    pass: failed > 0 || loaded.lines !== incidents ? false : null,
  });
}
