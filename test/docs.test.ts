import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { test } from 'node:test';
import { ROOT } from './helpers.ts';

/** What is built, installed or generated here, not written: never read. */
const NOT_WRITTEN = new Set([
  'node_modules',
  'dist',
  'data',
  'coverage',
  '.cache',
  '.bench',
  '.git',
  'generated',
]);

/** The files under `dir` (relative to the project), as written: what is built or installed left out. */
function filesUnder(dir: string): string[] {
  const path = join(ROOT, dir);
  if (!existsSync(path)) return [];
  return readdirSync(path, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)))
    .filter((file) => !file.split('/').some((part) => NOT_WRITTEN.has(part)));
}

/** The project's own files that name others: the code, the tests, the scripts and the docs. */
const CITING = ['src', 'test', 'scripts', 'bench', 'docs', 'deploy', '.ci', 'README.md', 'packages/sdk/src'];
/** A path into the project as comments and docs write it: a top folder, then a name with a dot or a slash. */
const CITED = /(?<![\w/.:@-])((?:src|docs|test|scripts|bench|deploy|packages|\.ci)\/[\w./-]*\w)/g;

test('every file the code, the tests and the docs name exists', () => {
  const files = CITING.flatMap((entry) => (entry.endsWith('.md') ? [entry] : filesUnder(entry)));
  const missing: string[] = [];
  for (const file of files) {
    const text = readFileSync(join(ROOT, file), 'utf8');
    for (const [, cited = ''] of text.matchAll(CITED)) {
      if (!existsSync(join(ROOT, cited))) missing.push(`${file} names ${cited}`);
    }
  }
  assert.ok(files.length > 100, `the files were found (${files.length})`);
  assert.deepEqual(missing, []);
});

test('every link of the Markdown docs to a file of the project leads to one', () => {
  const docs = ['README.md', ...['docs', 'test', 'packages'].flatMap(filesUnder)].filter((file) =>
    file.endsWith('.md'),
  );
  const broken: string[] = [];
  for (const doc of docs) {
    const text = readFileSync(join(ROOT, doc), 'utf8');
    for (const [, target = ''] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/i.test(target) || target.startsWith('#')) continue;
      const path = target.split('#')[0] ?? '';
      if (!existsSync(join(ROOT, dirname(doc), path))) broken.push(`${doc} links ${target}`);
    }
  }
  assert.ok(docs.length > 10, `the docs were found (${docs.length})`);
  assert.deepEqual(broken, []);
});

test('the README stays a README: at most 300 lines, the rest in docs/', () => {
  const lines = readFileSync(join(ROOT, 'README.md'), 'utf8').split('\n').length - 1;
  assert.ok(lines <= 300, `README.md has ${lines} lines`);
});
