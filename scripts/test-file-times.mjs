// A node:test reporter that `npm test` always adds: at the end of the run, the files that took
// longest, each with the time of its top-level tests (a file's tests run one after another, so
// that is the file's time, less the few hundred milliseconds of loading it). It also keeps each
// file's time in .cache/test-file-times.json, from which the next run starts the slowest files
// first (scripts/test.mjs): a long file started last would run alone at the end.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { relative } from 'node:path';

export const TIMES_FILE = '.cache/test-file-times.json';
/**
 * The times of one whole run, in seconds, kept in the repository: the order of a fresh checkout
 * (CI's), whose .cache holds none. Refreshed by hand when the slowest files change (test/README.md).
 */
const COMMITTED_TIMES_FILE = 'test/file-times.json';

function readJson(path) {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return {};
  }
}

/**
 * Each file's time (ms) by path relative to the project: kept by earlier runs here, else the
 * committed one; empty when there are none.
 */
export function keptTimes() {
  const committed = Object.entries(readJson(COMMITTED_TIMES_FILE)).map(([file, s]) => [file, s * 1000]);
  return { ...Object.fromEntries(committed), ...readJson(TIMES_FILE) };
}

export default async function* fileTimes(source) {
  const files = new Map();
  for await (const event of source) {
    if ((event.type === 'test:pass' || event.type === 'test:fail') && event.data.nesting === 0) {
      const file = relative(process.cwd(), event.data.file ?? '(unknown)');
      files.set(file, (files.get(file) ?? 0) + (event.data.details.duration_ms ?? 0));
    }
  }
  const sorted = [...files].sort((a, b) => b[1] - a[1]);
  const total = sorted.reduce((sum, [, ms]) => sum + ms, 0);
  try {
    mkdirSync('.cache', { recursive: true });
    writeFileSync(
      TIMES_FILE,
      JSON.stringify({ ...readJson(TIMES_FILE), ...Object.fromEntries(sorted) }, null, 1),
    );
  } catch {
    // Only an ordering hint: a run that cannot keep it is not failed for that.
  }
  yield `\nslowest test files (of ${sorted.length}, ${(total / 1000).toFixed(0)} s in all):\n`;
  for (const [file, ms] of sorted.slice(0, 15)) yield `${(ms / 1000).toFixed(1).padStart(7)} s  ${file}\n`;
}
