import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startApi } from './api.ts';
import { stop } from './processes.ts';
import { addRow, fmt, log } from './report.ts';
import { settings, WORK } from './settings.ts';
import { load } from './wrk.ts';
import { PAGE_ONE } from './scenarios/ratio.ts';

/** The parts of a V8 `.cpuprofile` (what `node --cpu-prof` writes) that a summary needs. */
interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
  samples: number[];
  timeDeltas: number[];
}

/**
 * Where a function's code lives: a package (what node_modules/ names), Node.js itself, the
 * service's own bundle (dist/), or V8's pseudo-frames (garbage collection, native code).
 */
function areaOf(frame: { functionName: string; url: string }): string {
  if (frame.url === '') {
    if (frame.functionName === '(garbage collector)') return 'garbage collection';
    if (frame.functionName === '(program)') return 'V8 and native code (program)';
    // Node's C++ bindings, as JavaScript sees them: writev and writeUtf8String (socket writes), read.
    return 'native bindings';
  }
  const inPackage = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(frame.url);
  if (inPackage !== null) return inPackage[1] as string;
  if (frame.url.startsWith('node:')) return 'Node.js core (node:*)';
  if (frame.url.includes('/dist/')) return 'the service (dist/)';
  return frame.url;
}

/** Self time per area and per function, in shares of the busy time (idle excluded). */
export function summarize(profile: CpuProfile) {
  const byId = new Map(profile.nodes.map((node) => [node.id, node.callFrame]));
  const areas = new Map<string, number>();
  const functions = new Map<string, number>();
  let busy = 0;
  profile.samples.forEach((id, i) => {
    const frame = byId.get(id);
    const us = profile.timeDeltas[i] ?? 0;
    if (frame === undefined || frame.functionName === '(idle)') return;
    busy += us;
    const area = areaOf(frame);
    areas.set(area, (areas.get(area) ?? 0) + us);
    const name = `${frame.functionName || '(anonymous)'} [${area}]`;
    functions.set(name, (functions.get(name) ?? 0) + us);
  });
  const top = (totals: Map<string, number>, count: number) =>
    [...totals]
      .sort((a, b) => b[1] - a[1])
      .slice(0, count)
      .map(([name, us]) => `${name} ${fmt((us / busy) * 100, 1)}%`);
  return { busyMs: busy / 1000, areas: top(areas, 8), functions: top(functions, 10) };
}

/**
 * Page 1 under wrk on a server started with `--cpu-prof`, in a run of its own (sampling slows the
 * server, so the ratios are measured without it): where the server's CPU time goes, by area and by
 * function, as self time. The profile covers the process's whole life, so its start-up (module
 * compilation, migrations) is in it too, a few per cent of a 10-second run.
 */
export async function profilePageOne(label: string, env: Record<string, string>): Promise<void> {
  const dir = mkdtempSync(join(WORK, 'profile-'));
  const api = await startApi(`${label} profiled`, env, ['--cpu-prof', '--cpu-prof-dir', dir]);
  log(`${label}: page 1 under wrk with --cpu-prof, ${settings.seconds} s`);
  try {
    await load(api.pid, api.port, PAGE_ONE, api.auth, { seconds: 1 });
    await load(api.pid, api.port, PAGE_ONE, api.auth);
  } finally {
    // The profile is written when the process exits.
    await stop(api.process);
  }
  const file = readdirSync(dir).find((name) => name.endsWith('.cpuprofile'));
  if (file === undefined) throw new Error(`no profile was written to ${dir}`);
  const summary = summarize(JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile);
  addRow({
    measurement: `${label}: page 1 CPU profile, self time by area (--cpu-prof, its own run)`,
    result: `${summary.areas.join(', ')} (of ${fmt(summary.busyMs)} ms busy)`,
    target: 'report',
    pass: null,
  });
  addRow({
    measurement: `${label}: page 1 CPU profile, the 10 functions with the most self time`,
    result: summary.functions.join(', '),
    target: 'report',
    pass: null,
  });
}
