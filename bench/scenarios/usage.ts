import { join } from 'node:path';
import { createKey } from '../data.ts';
import { nextPort } from '../api.ts';
import { get } from '../http.ts';
import { startServer, stop } from '../processes.ts';
import { addRow, fmt, log, spread } from '../report.ts';
import { ROOT, settings } from '../settings.ts';
import type { StoreCounter } from '../stores.ts';
import { failures, type LoadResult, load } from '../wrk.ts';
import { PAGE_ONE } from './ratio.ts';

/** Issue 24: throughput with usage recorded must stay within 5% of the same build without it. */
const TARGET = 0.95;

async function startUsageServer(
  recording: 'on' | 'off',
  env: Record<string, string>,
  auth: Record<string, string>,
) {
  const port = nextPort();
  const child = await startServer(
    [join(ROOT, 'bench/usage-server.ts'), recording],
    { ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
    async () => (await get(port, PAGE_ONE, auth)).status === 200,
  );
  return { child, port };
}

/**
 * Page-1 throughput of the application with key usage recorded and without, on the same store and
 * key, in alternating rounds (`settings.rounds` each), so that both see the same machine. Both run
 * from the same sources through bench/usage-server.ts, which differs only in the recorder. With
 * `counters` (PostgreSQL): what the stores did per request over the recording server's rounds,
 * flushes included (a round of `settings.seconds` ≥ 10 s spans at least one).
 */
export async function usageOverhead(
  label: string,
  env: Record<string, string>,
  counters: StoreCounter[] = [],
) {
  const auth = await createKey(`bench usage ${label}`, env);
  const on = await startUsageServer('on', env, auth);
  const off = await startUsageServer('off', env, auth);
  log(
    `${label}: page 1 with key usage recorded and without, ${settings.seconds} s each, ${settings.rounds} rounds`,
  );
  const onRuns: LoadResult[] = [];
  const offRuns: LoadResult[] = [];
  const used = counters.map(() => 0);
  try {
    await load(off.child.pid, off.port, PAGE_ONE, auth, { seconds: 1 });
    await load(on.child.pid, on.port, PAGE_ONE, auth, { seconds: 1 });
    // The order alternates (off first, then on first), so that a machine getting busier or quieter
    // during the runs does not favour one side.
    const measureOn = async () => {
      const before = await Promise.all(counters.map((c) => c.read()));
      onRuns.push(await load(on.child.pid, on.port, PAGE_ONE, auth));
      const after = await Promise.all(counters.map((c) => c.read()));
      counters.forEach((_, i) => {
        used[i] = (used[i] as number) + (after[i] as number) - (before[i] as number);
      });
    };
    const measureOff = async () => {
      offRuns.push(await load(off.child.pid, off.port, PAGE_ONE, auth));
    };
    for (let round = 0; round < settings.rounds; round += 1) {
      const order = round % 2 === 0 ? [measureOff, measureOn] : [measureOn, measureOff];
      for (const measure of order) await measure();
    }
  } finally {
    await stop(on.child);
    await stop(off.child);
  }
  const best = (runs: LoadResult[]) => runs.reduce((a, b) => (b.rps > a.rps ? b : a));
  const ratio = best(onRuns).rps / best(offRuns).rps;
  const failed = failures([...onRuns, ...offRuns]);
  addRow({
    measurement: `${label}: page 1 req/s with key usage recorded vs without (same sources), best of ${settings.rounds}`,
    result: `${fmt(best(onRuns).rps)} vs ${fmt(best(offRuns).rps)} = ${fmt(ratio * 100)}% (rounds: on ${spread(onRuns.map((r) => r.rps))}, off ${spread(offRuns.map((r) => r.rps))}${failed > 0 ? `; ${failed} failed requests!` : ''})`,
    target: `>= ${fmt(TARGET * 100)}%`,
    pass: failed === 0 && ratio >= TARGET,
  });
  const requests = onRuns.reduce((n, r) => n + r.requests, 0);
  counters.forEach((counter, i) => {
    addRow({
      measurement: `${label}: ${counter.name} per page-1 request with usage recorded, over its ${settings.rounds} rounds`,
      result: `${fmt((used[i] as number) / requests, 5)} (${fmt(used[i] as number)} for ${fmt(requests)} requests)`,
      target: counter.below === undefined ? 'report' : `< ${counter.below}`,
      pass: counter.below === undefined ? null : (used[i] as number) / requests < counter.below,
    });
  });
}
