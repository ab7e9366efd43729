// `npm test`: every test/**/*.test.ts file under node's test runner (through tsx). Node 20's
// runner takes no glob, so the files are listed here. Extra arguments select files by substring.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { buildDist } from './build.mjs';
import { createTemplates } from './test-templates.mjs';

function testFiles(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return testFiles(path);
    return entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

const filters = process.argv.slice(2);
const files = testFiles('test')
  .filter((file) => filters.length === 0 || filters.some((f) => file.includes(f)))
  .sort();
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
// Tests run the real executable, which runs the bundle: build it from the sources under test.
await buildDist();
// TEST_REPORT_FILE (set by scripts/test-stress.mjs): a TAP report of the run, beside the usual one.
// TEST_FILE_TIMES=1: the slowest files at the end (scripts/test-file-times.mjs).
const report = process.env.TEST_REPORT_FILE;
const extra = [
  ...(report === undefined ? [] : ['--test-reporter=tap', `--test-reporter-destination=${report}`]),
  ...(process.env.TEST_FILE_TIMES === '1'
    ? ['--test-reporter=./scripts/test-file-times.mjs', '--test-reporter-destination=stdout']
    : []),
];
const reporters =
  extra.length === 0 ? [] : ['--test-reporter=spec', '--test-reporter-destination=stdout', ...extra];
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
    ['--import', 'tsx', '--test', '--test-concurrency=2', '--test-timeout=120000', ...reporters, ...files],
    { stdio: 'inherit', env: { ...process.env, ...templates.env } },
  );
  [code] = await once(runner, 'exit');
} finally {
  await templates.drop();
}
process.exit(code ?? 1);
