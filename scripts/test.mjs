// `npm test`: every test/**/*.test.ts file under node's test runner (through tsx). Node 20's
// runner takes no glob, so the files are listed here. Extra arguments select files by substring.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { buildDist } from './build.mjs';
import { keptTimes } from './test-file-times.mjs';
import { createTemplates } from './test-templates.mjs';

function testFiles(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return testFiles(path);
    return entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

const filters = process.argv.slice(2);
// The slowest files first, by the times the last runs kept (scripts/test-file-times.mjs); files with
// no time kept (new ones, or every file on a fresh checkout) before them, in name order.
const kept = keptTimes();
const files = testFiles('test')
  .filter((file) => filters.length === 0 || filters.some((f) => file.includes(f)))
  .sort()
  .sort((a, b) => (kept[b] ?? Number.POSITIVE_INFINITY) - (kept[a] ?? Number.POSITIVE_INFINITY) || 0);
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
// Tests run the real executable, which runs the bundle: build it from the sources under test.
await buildDist();
// The usual report, then the slowest files (scripts/test-file-times.mjs); TEST_REPORT_FILE (set by
// scripts/test-stress.mjs): a TAP report of the run as well.
const report = process.env.TEST_REPORT_FILE;
const reporters = [
  '--test-reporter=spec',
  '--test-reporter-destination=stdout',
  '--test-reporter=./scripts/test-file-times.mjs',
  '--test-reporter-destination=stdout',
  ...(report === undefined ? [] : ['--test-reporter=tap', `--test-reporter-destination=${report}`]),
];
const stores = (process.env.TEST_STORES ?? 'sqlite,postgres').split(',');
const templates = await createTemplates(stores);
// Ctrl-C reaches the runner too (same process group); this process waits for it to stop, then
// drops the templates.
process.on('SIGINT', () => {});
process.on('SIGTERM', () => {});
let code = 1;
try {
  const runner = spawn(
    process.execPath,
    ['--import', 'tsx', '--test', '--test-concurrency=3', '--test-timeout=120000', ...reporters, ...files],
    { stdio: 'inherit', env: { ...process.env, ...templates.env } },
  );
  [code] = await once(runner, 'exit');
} finally {
  await templates.drop();
}
process.exit(code ?? 1);
