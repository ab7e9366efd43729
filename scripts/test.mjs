// `npm test`: every test/**/*.test.ts file under node's test runner (TypeScript through Node's own type stripping). Extra arguments
// select files by substring.
import { createWriteStream, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { finished } from 'node:stream/promises';
import { run } from 'node:test';
import { spec, tap } from 'node:test/reporters';
import { buildDist } from './build.mjs';
import fileTimes, { keptTimes } from './test-file-times.mjs';
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
const stores = (process.env.TEST_STORES ?? 'sqlite,postgres').split(',');
const templates = await createTemplates(stores);
// The runner's API rather than `node --test`, which sorts the files it is given by name: each test
// file runs in a process of its own (TypeScript through Node's own type stripping), three at a time, in the order above.
Object.assign(process.env, templates.env);
// Every process of the run (test files, and the servers and commands they start) keeps V8's
// compiled code of the modules it loads in .cache/compile and starts from it: a test file's
// process loads about 1,850 modules, 0.83 CPU-s without it, 0.52 with (test/README.md).
process.env.NODE_COMPILE_CACHE ??= resolve('.cache', 'compile');
const cancel = new AbortController();
// Ctrl-C reaches the test processes too (same process group): the run ends, then the templates go.
process.on('SIGINT', () => cancel.abort());
process.on('SIGTERM', () => cancel.abort());
let failed = false;
try {
  const stream = run({
    files,
    concurrency: 3,
    timeout: 120_000,
    // A file's process ends once its tests have: a test that timed out and left a child process
    // or a worker waiting (a hung import, say) fails the run instead of holding it forever.
    forceExit: true,
    signal: cancel.signal,
  });
  stream.on('test:fail', () => {
    failed = true;
  });
  // The usual report, then the slowest files (scripts/test-file-times.mjs); TEST_REPORT_FILE (set
  // by scripts/test-stress.mjs): a TAP report of the run as well.
  // Three reporters read the stream, each through a few piped streams: more 'end' listeners than
  // Node's default warning threshold, and none of them a leak.
  stream.setMaxListeners(20);
  const done = [];
  for (const reporter of [spec, fileTimes]) {
    const lines = stream.compose(reporter);
    lines.pipe(process.stdout);
    done.push(finished(lines));
  }
  const report = process.env.TEST_REPORT_FILE;
  if (report !== undefined) done.push(finished(stream.compose(tap).pipe(createWriteStream(report))));
  await Promise.all(done);
} finally {
  await templates.drop();
}
process.exit(failed || cancel.signal.aborted ? 1 : 0);
