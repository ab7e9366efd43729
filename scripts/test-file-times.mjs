// A node:test reporter (`TEST_FILE_TIMES=1 npm test`): at the end of the run, the files that took
// longest, each with the time of its top-level tests (a file's tests run one after another, so
// that is the file's time, less the few hundred milliseconds of loading it).
export default async function* fileTimes(source) {
  const files = new Map();
  for await (const event of source) {
    if ((event.type === 'test:pass' || event.type === 'test:fail') && event.data.nesting === 0) {
      const file = event.data.file ?? '(unknown)';
      files.set(file, (files.get(file) ?? 0) + (event.data.details.duration_ms ?? 0));
    }
  }
  const root = `${process.cwd()}/`;
  const sorted = [...files].sort((a, b) => b[1] - a[1]);
  const total = sorted.reduce((sum, [, ms]) => sum + ms, 0);
  yield `\nslowest test files (of ${sorted.length}, ${(total / 1000).toFixed(0)} s in all):\n`;
  for (const [file, ms] of sorted.slice(0, 25))
    yield `${(ms / 1000).toFixed(1).padStart(7)} s  ${file.replace(root, '')}\n`;
}
