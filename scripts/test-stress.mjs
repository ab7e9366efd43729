// `npm run test:stress [-- FILTER…]`: the suite (or the files whose path contains a FILTER) while
// the machine is loaded by as many busy processes as it has cores, started and stopped here, then
// the name of every test that failed. STRESS_RUNS=N runs it N times in a row (default 1) and says
// which runs were clean. A test that depends on time is proven here before it lands
// (test/README.md, "Writing tests"). Exits 1 if any run had a failure.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';

const runs = Number(process.env.STRESS_RUNS ?? 1);
if (!Number.isInteger(runs) || runs < 1) {
  console.error('STRESS_RUNS must be a whole number of at least 1');
  process.exit(2);
}
const filters = process.argv.slice(2);
const cores = availableParallelism();
const work = mkdtempSync(join(tmpdir(), 'safety-api-stress-'));

/** Busy processes, one per core: each spins at 100% of a core until killed. */
function load() {
  return Array.from({ length: cores }, () =>
    spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }),
  );
}

/**
 * The names of the failed tests in a TAP report, each with the suites around it. A suite that
 * failed because a test in it did is not named again: only a failure with no subtest of its own is
 * (a test, or a suite whose hook failed before any test ran).
 */
function failures(tap) {
  const names = [];
  const path = [];
  const hasChild = [];
  for (const line of tap.split('\n')) {
    const subtest = /^( *)# Subtest: (.*)$/.exec(line);
    const result = /^( *)(not ok|ok) \d+ - (.*?)(?: # .*)?$/.exec(line);
    if (subtest) {
      const depth = subtest[1].length / 4;
      path.length = depth;
      path[depth] = subtest[2];
      hasChild[depth] = false;
      if (depth > 0) hasChild[depth - 1] = true;
    } else if (result && result[2] === 'not ok') {
      const depth = result[1].length / 4;
      if (!hasChild[depth]) names.push([...path.slice(0, depth), result[3]].join(' › '));
    }
  }
  return names;
}

let busy = [];
const stop = () => {
  for (const child of busy) child.kill('SIGKILL');
  busy = [];
};
process.on('SIGINT', () => {
  stop();
  process.exit(130);
});

const results = [];
try {
  for (let run = 1; run <= runs; run += 1) {
    const report = join(work, `run-${run}.tap`);
    console.log(`\n== stress run ${run} of ${runs}: ${cores} busy processes`);
    busy = load();
    const started = Date.now();
    const code = await new Promise((resolve) => {
      const child = spawn(process.execPath, ['scripts/test.mjs', ...filters], {
        stdio: 'inherit',
        env: { ...process.env, TEST_REPORT_FILE: report },
      });
      child.on('exit', (exitCode) => resolve(exitCode ?? 1));
    });
    stop();
    let failed = [];
    try {
      failed = failures(readFileSync(report, 'utf8'));
    } catch {
      failed = ['(no report: the test runner did not finish)'];
    }
    if (code !== 0 && failed.length === 0) failed = [`(the test runner exited ${code})`];
    results.push({ run, failed, minutes: (Date.now() - started) / 60_000 });
  }
} finally {
  stop();
  rmSync(work, { recursive: true, force: true });
}

console.log('\n== stress summary');
for (const { run, failed, minutes } of results) {
  console.log(
    `run ${run}: ${failed.length === 0 ? 'clean' : `${failed.length} failed`} (${minutes.toFixed(1)} min)`,
  );
  for (const name of failed) console.log(`  ✖ ${name}`);
}
process.exit(results.every(({ failed }) => failed.length === 0) ? 0 : 1);
