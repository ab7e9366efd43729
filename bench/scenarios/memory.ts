import { memoryMb } from '../processes.ts';
import { addRow, fmt } from '../report.ts';
import type { LoadResult } from '../wrk.ts';

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
    target: 'bounded (page cache 64 MiB, body cache 32 MiB)',
    pass: null,
  });
}
