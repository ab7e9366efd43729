import { memoryMb } from '../processes.ts';
import { addRow, fmt } from '../report.ts';
import { settings } from '../settings.ts';
import type { LoadResult } from '../wrk.ts';

/** Issue 25: the server's RSS after walking, exporting and replaying 1M incidents stays below this. */
const RSS_TARGET_MB = 300;

/** The server's RSS after each load run (`runs`, described by `which`), then its peak. */
export function memory(pid: number, runs: LoadResult[], which: string): void {
  addRow({
    measurement: `server RSS after each load run (${which})`,
    result: `${runs.map((r) => fmt(r.rssMb)).join(', ')} MB`,
    target: 'stable',
    pass: null,
  });
  addRow({
    measurement: 'server peak RSS after all the load above',
    result: `${fmt(memoryMb(pid, 'VmHWM'))} MB`,
    target: 'report',
    pass: null,
  });
}

/**
 * The server's RSS right after `step` (the walk, the export, the feed replay), and its peak so far;
 * `withTarget`: judged against issue 25's bound (with the 1M-incident data set), else reported.
 */
export function rssAfter(label: string, pid: number, step: string, withTarget: boolean): void {
  const rss = memoryMb(pid, 'VmRSS');
  addRow({
    measurement:
      `${label}: server RSS after ${step} (CACHE_MAX_MB ${process.env.CACHE_MAX_MB ?? 'default'}, ` +
      `node ${settings.serverNodeOptions.join(' ') || 'defaults'})`,
    result: `${fmt(rss)} MB (peak so far ${fmt(memoryMb(pid, 'VmHWM'))} MB)`,
    target: withTarget ? `< ${RSS_TARGET_MB} MB` : 'report',
    pass: withTarget ? rss < RSS_TARGET_MB : null,
  });
}
