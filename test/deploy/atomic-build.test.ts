import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { once } from 'node:events';
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type CliResult, ROOT, runNode } from '../helpers.ts';
import { sleep } from '../wait.ts';

/**
 * `npm run build` while the executable runs from the same folder. Each test works on a copy of the
 * project (sources, scripts, the executable; node_modules linked) whose sources it can change, so
 * that every build differs from the one before, as when a developer edits while a server runs.
 */

function copyProject(): string {
  const dir = mkdtempSync(join(tmpdir(), 'safety-api-build-'));
  for (const path of ['src', 'scripts', 'bin', 'package.json'])
    cpSync(join(ROOT, path), join(dir, path), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

const run = (dir: string, args: string[], env: Record<string, string> = {}): Promise<CliResult> =>
  runNode(args, { cwd: dir, env });

/** The build dist/current points at, or null. */
function currentBuild(dir: string): string | null {
  try {
    return readlinkSync(join(dir, 'dist/current'));
  } catch {
    return null;
  }
}

async function build(dir: string): Promise<void> {
  const result = await run(dir, ['scripts/build.mjs']);
  assert.equal(result.code, 0, result.stderr);
}

/** Changes a source file so that the next build differs (its source map carries the sources). */
function edit(dir: string, mark: string): void {
  appendFileSync(join(dir, 'src/cli/main.ts'), `// ${mark}\n`);
}

async function startServe(dir: string, env: Record<string, string>) {
  const child: ChildProcessWithoutNullStreams = spawn(process.execPath, ['bin/safety-api.js', 'serve'], {
    cwd: dir,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
  });
  let output = '';
  child.stdout.on('data', (d) => {
    output += d;
  });
  child.stderr.on('data', (d) => {
    output += d;
  });
  const deadline = Date.now() + 60_000;
  let match: RegExpExecArray | null = null;
  while (match === null) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`server did not start:\n${output}`);
    await sleep(50);
    match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
  }
  return {
    url: match[1] as string,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      const [code] = await once(child, 'exit');
      return code as number | null;
    },
  };
}

describe('npm run build while the executable runs from the same folder', () => {
  let dir: string;
  let server: Awaited<ReturnType<typeof startServe>>;
  let env: Record<string, string>;

  before(async () => {
    dir = copyProject();
    mkdirSync(join(dir, 'data'));
    env = { DATABASE_URL: `sqlite:${join(dir, 'data/test.db')}` };
    await build(dir);
    server = await startServe(dir, env);
  });
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  // Five builds and twenty CLI processes: minutes on a loaded machine, past the suite's 120 s default.
  test(
    'five builds, each different, while CLI calls and requests run: none fails',
    { timeout: 600_000 },
    async () => {
      const BUILDS = 5;
      const AT_LEAST = 20;
      const first = currentBuild(dir);
      const failures: string[] = [];
      let calls = 0;
      let requests = 0;
      let building = true;

      const callLoop = async () => {
        while (building) {
          const result = await run(dir, ['bin/safety-api.js', 'accounts', 'list'], env);
          calls += 1;
          if (result.code !== 0 || !result.stdout.startsWith('No accounts'))
            failures.push(`CLI call exited ${result.code}: ${result.stderr.split('\n')[0]}`);
        }
      };
      const requestLoop = async () => {
        while (building) {
          for (const path of ['/readyz', '/healthz', '/openapi.json']) {
            const res = await fetch(`${server.url}${path}`).catch((error: Error) => error);
            requests += 1;
            if (res instanceof Error || res.status !== 200)
              failures.push(`GET ${path}: ${res instanceof Error ? res.message : res.status}`);
            else await res.arrayBuffer();
          }
          await sleep(20);
        }
      };
      const buildLoop = async () => {
        try {
          for (let i = 1; i <= BUILDS; i += 1) {
            edit(dir, `build ${i}`);
            await build(dir);
            // The builds are spread over the calls, so that every build meets some.
            while (calls < (AT_LEAST * i) / BUILDS && failures.length === 0) await sleep(20);
          }
        } finally {
          building = false;
        }
      };
      await Promise.all([buildLoop(), callLoop(), callLoop(), requestLoop()]);

      assert.deepEqual(failures, []);
      assert.ok(calls >= AT_LEAST, `${calls} CLI calls`);
      assert.ok(requests >= AT_LEAST, `${requests} requests`);
      // Each build was switched to, and the replaced ones stay for the processes that started on them.
      assert.notEqual(currentBuild(dir), first);
      const builds = readdirSync(join(dir, 'dist')).filter((name) => name.startsWith('build-'));
      assert.equal(builds.length, BUILDS + 1, builds.join(', '));
      assert.equal((await fetch(`${server.url}/readyz`)).status, 200);
    },
  );
});

describe('which builds a build removes', () => {
  let dir: string;

  before(() => {
    dir = copyProject();
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('an unchanged build is not switched to; builds replaced over an hour ago go, recent ones stay', async () => {
    await build(dir);
    const first = readlinkSync(join(dir, 'dist/current'));
    await build(dir);
    assert.equal(readlinkSync(join(dir, 'dist/current')), first, 'the same sources: the same build');

    const hoursAgo = (hours: number) => new Date(Date.now() - hours * 3_600_000);
    const plant = (name: string, age: Date) => {
      mkdirSync(join(dir, 'dist', name));
      writeFileSync(join(dir, 'dist', name, 'cli.js'), '');
      utimesSync(join(dir, 'dist', name), age, age);
    };
    plant('build-replaced-long-ago', hoursAgo(2));
    plant('build-replaced-lately', hoursAgo(0.5));
    plant('.staging-of-a-build-that-failed', hoursAgo(3));
    // A bundle as builds wrote it before they had folders of their own.
    writeFileSync(join(dir, 'dist/cli.js'), '');
    utimesSync(join(dir, 'dist/cli.js'), hoursAgo(5), hoursAgo(5));
    // The build in use is never removed, however long ago it was made.
    utimesSync(join(dir, 'dist', first), hoursAgo(9), hoursAgo(9));

    await build(dir);
    assert.deepEqual(
      readdirSync(join(dir, 'dist')).sort(),
      ['build-replaced-lately', ...[first].sort(), 'current'].sort(),
    );

    edit(dir, 'a change');
    await build(dir);
    const second = readlinkSync(join(dir, 'dist/current'));
    assert.notEqual(second, first);
    assert.ok(existsSync(join(dir, 'dist', second, 'cli.js')));
    // Replaced just now: its retention starts at the switch, not when it was made nine hours ago.
    assert.ok(existsSync(join(dir, 'dist', first, 'cli.js')), 'the replaced build stays');
    assert.deepEqual(
      readdirSync(join(dir, 'dist')).filter((name) => name.startsWith('.')),
      [],
      'no staging folder or link is left behind',
    );
  });
});
