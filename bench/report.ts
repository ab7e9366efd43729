/** The bench's one table of results: each measurement beside its target. */

export interface Row {
  measurement: string;
  result: string;
  target: string;
  /** `null`: reported, not judged. */
  pass: boolean | null;
}

const rows: Row[] = [];

export function addRow(row: Row): void {
  rows.push(row);
}

export const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** "low–high" of a set of values, or the one value when they all round to the same figure. */
export function spread(values: number[], digits = 0): string {
  const low = fmt(Math.min(...values), digits);
  const high = fmt(Math.max(...values), digits);
  return low === high ? low : `${low}–${high}`;
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

/** The nearest-rank `p`-th percentile (0 < p <= 100): the least value with p% of them at or below it. */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

/** Prints the heading lines, then the rows as a Markdown table (docs/performance.md quotes it). */
export function printTable(heading: string[]): void {
  const header = ['measurement', 'result', 'target', 'pass'];
  const cells = rows.map((r) => [
    r.measurement,
    r.result,
    r.target,
    r.pass === null ? '-' : r.pass ? 'PASS' : 'FAIL',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => (c[i] as string).length)));
  const line = (c: string[]) => `| ${c.map((v, i) => v.padEnd(widths[i] as number)).join(' | ')} |`;
  console.log(`\n${heading.join('\n')}\n`);
  console.log(line(header));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const c of cells) console.log(line(c));
}

/** Progress on stderr, so that stdout holds only the table. */
export function log(line: string): void {
  process.stderr.write(`[bench] ${line}\n`);
}
