import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, posix } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  type Copy,
  DockerfileParser,
  type Healthcheck,
  type Instruction,
  type JSONInstruction,
  type PropertyInstruction,
} from 'dockerfile-ast';
import { freePort } from '../faults/harness.ts';
import { outputOf, ROOT } from '../helpers.ts';
import { sleep } from '../wait.ts';

/**
 * The Dockerfile, checked without a container runtime (none runs on these machines, and no base
 * image can be pulled): its instructions are parsed and held to what docs/deployment.md promises,
 * and the runtime stage's recipe is run on the host: exactly the paths its COPY lines name, in an
 * empty folder made read-only, served by an unprivileged user. A path the image forgets fails here.
 */

const text = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
const dockerfile = DockerfileParser.parse(text);
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Record<string, string>;

interface Stage {
  name: string | null;
  image: string;
  instructions: Instruction[];
}

/** The instructions of each stage, from its FROM to the next. */
function stages(): Stage[] {
  const result: Stage[] = [];
  for (const instruction of dockerfile.getInstructions()) {
    if (instruction.getKeyword() === 'FROM') {
      const from = dockerfile
        .getFROMs()
        .find((f) => f.getRange().start.line === instruction.getRange().start.line);
      result.push({ name: from?.getBuildStage() ?? null, image: from?.getImage() ?? '', instructions: [] });
    } else {
      result.at(-1)?.instructions.push(instruction);
    }
  }
  return result;
}

const all = (stage: Stage, keyword: string) => stage.instructions.filter((i) => i.getKeyword() === keyword);
const only = (stage: Stage, keyword: string) => {
  const found = all(stage, keyword);
  assert.equal(found.length, 1, `one ${keyword} in the stage`);
  return found[0] as Instruction;
};
const properties = (stage: Stage, keyword: 'ENV' | 'LABEL') =>
  Object.fromEntries(
    all(stage, keyword).flatMap((i) =>
      (i as PropertyInstruction).getProperties().map((p) => [p.getName(), p.getValue()]),
    ),
  ) as Record<string, string>;
const json = (instruction: Instruction) =>
  (instruction as JSONInstruction).getJSONStrings().map((s) => s.getJSONValue());

const [buildStage, runtimeStage] = stages() as [Stage, Stage];

describe('Dockerfile', () => {
  test('two stages on the official node:24 slim image, pinned by major and Debian release', () => {
    assert.equal(stages().length, 2);
    assert.equal(buildStage.name, 'build');
    for (const stage of [buildStage, runtimeStage]) assert.equal(stage.image, 'node:24-bookworm-slim');
  });

  test('build stage: production dependencies by npm ci (better-sqlite3 built there), then the bundle', () => {
    const runs = all(buildStage, 'RUN').map((i) => i.getArgumentsContent() ?? '');
    const install = runs.find((run) => run.includes('npm ci'));
    assert.match(install ?? '', /npm ci --omit=dev\b/);
    assert.match(install ?? '', /npm rebuild better-sqlite3/);
    assert.ok(runs.includes('npm run build'));
    // Everything the runtime stage takes comes from here, made with the same base image.
    for (const copy of all(runtimeStage, 'COPY'))
      assert.equal((copy as Copy).getFromFlag()?.getValue(), 'build');
  });

  test('runtime stage: user node, /data volume, SQLite there by default, port, stop signal, health check', () => {
    assert.equal(only(runtimeStage, 'USER').getArgumentsContent(), 'node');
    assert.equal(only(runtimeStage, 'VOLUME').getArgumentsContent(), '/data');
    const env = properties(runtimeStage, 'ENV');
    assert.equal(env.DATABASE_URL, 'sqlite:/data/safety-api.db');
    assert.equal(only(runtimeStage, 'EXPOSE').getArgumentsContent(), env.PORT);
    assert.equal(env.PORT, '8080');
    assert.equal(only(runtimeStage, 'STOPSIGNAL').getArgumentsContent(), 'SIGTERM');
    const healthcheck = only(runtimeStage, 'HEALTHCHECK');
    const content = healthcheck.getArgumentsContent() ?? '';
    assert.deepEqual(JSON.parse(content.slice(content.indexOf('['))), ['safety-api', 'healthcheck']);
    const flags = Object.fromEntries(
      (healthcheck as Healthcheck).getFlags().map((f) => [f.getName(), f.getValue()]),
    );
    // Longer than the command's own 2 s bound, so Docker never kills a probe that was answering.
    assert.equal(flags.timeout, '5s');
    assert.deepEqual(json(only(runtimeStage, 'ENTRYPOINT')), ['safety-api']);
    assert.deepEqual(json(only(runtimeStage, 'CMD')), ['serve']);
    const run = only(runtimeStage, 'RUN').getArgumentsContent() ?? '';
    assert.match(run, /ln -s \/app\/bin\/safety-api\.js \/usr\/local\/bin\/safety-api/);
    assert.match(run, /chown node:node \/data/);
    assert.doesNotMatch(run, /npm/, 'nothing is installed or built in the runtime stage');
  });

  test('OCI labels: version, licenses and description as package.json says; source from a build argument', () => {
    const labels = properties(runtimeStage, 'LABEL');
    assert.equal(labels['org.opencontainers.image.version'], manifest.version);
    assert.equal(labels['org.opencontainers.image.licenses'], manifest.license);
    assert.equal(labels['org.opencontainers.image.description'], manifest.description);
    assert.equal(labels['org.opencontainers.image.title'], manifest.name);
    assert.equal(labels['org.opencontainers.image.source'], '${SOURCE_URL}');
    assert.ok(all(runtimeStage, 'ARG').some((arg) => arg.getArgumentsContent()?.startsWith('SOURCE_URL')));
  });

  test('.dockerignore keeps dependencies, history, data, caches, build and test output and secrets out', () => {
    const ignored = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .filter((line) => line !== '' && !line.startsWith('#'));
    for (const entry of [
      'node_modules',
      '.git',
      'data',
      '*.db',
      '.cache',
      'dist',
      '.bench',
      'coverage',
      '.env',
    ])
      assert.ok(ignored.includes(entry), entry);
  });
});

/** What the runtime stage's COPY lines bring, as paths of this repository and of the image's /app. */
function runtimeCopies(): { from: string; to: string }[] {
  const workdir = (stage: Stage) => only(stage, 'WORKDIR').getArgumentsContent() ?? '';
  const buildDir = workdir(buildStage);
  const appDir = workdir(runtimeStage);
  return all(runtimeStage, 'COPY').flatMap((copy) => {
    const args = copy.getArguments().map((a) => a.getValue());
    const destination = args.at(-1) as string;
    const sources = args.slice(0, -1);
    return sources.map((source) => {
      assert.ok(source.startsWith(`${buildDir}/`), source);
      const to = posix.relative(
        appDir,
        posix.resolve(appDir, sources.length > 1 ? posix.join(destination, basename(source)) : destination),
      );
      return { from: source.slice(buildDir.length + 1), to };
    });
  });
}

/** Every file and link under `dir`, with what would show a write to it. */
function snapshot(dir: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (path: string) => {
    for (const entry of readdirSync(path, { withFileTypes: true })) {
      const full = join(path, entry.name);
      const stat = statSync(full, { throwIfNoEntry: false });
      files.set(full, `${stat?.size}:${stat?.mtimeMs}:${stat?.mode}`);
      if (entry.isDirectory()) walk(full);
    }
  };
  walk(dir);
  return files;
}

const NOBODY = { uid: 65534, gid: 65534 };

describe("the runtime stage's recipe, run on this machine", () => {
  let app: string;
  let data: string;
  /** Where the RUN line's link to the executable goes (the image's /usr/local/bin). */
  let commands: string;
  let env: Record<string, string>;

  before(async () => {
    app = mkdtempSync(join(tmpdir(), 'safety-api-image-'));
    for (const { from, to } of runtimeCopies()) {
      // Made by the build stage's npm ci, which runs here below as it does there.
      if (from === 'node_modules') continue;
      assert.ok(existsSync(join(ROOT, from)), `${from} exists (npm test builds dist/ first)`);
      mkdirSync(join(app, posix.dirname(to)), { recursive: true });
      cpSync(join(ROOT, from), join(app, to), { recursive: true, verbatimSymlinks: true });
    }
    const install = all(buildStage, 'RUN')
      .map((i) => i.getArgumentsContent() ?? '')
      .find((run) => run.includes('npm ci')) as string;
    // The npm cache is warm: no need to ask the registry for what it holds.
    execFileSync('sh', ['-c', install], {
      cwd: app,
      env: { ...process.env, npm_config_prefer_offline: 'true' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    // Read-only and not the server's: as a read-only root filesystem is for user node.
    execFileSync('chmod', ['-R', 'a-w', app]);
    chmodSync(app, 0o555);
    data = mkdtempSync(join(tmpdir(), 'safety-api-data-'));
    chownSync(data, NOBODY.uid, NOBODY.gid);
    commands = mkdtempSync(join(tmpdir(), 'safety-api-bin-'));
    chmodSync(commands, 0o755);
    const [, target, link] =
      /ln -s (\S+) (\S+)/.exec(only(runtimeStage, 'RUN').getArgumentsContent() ?? '') ?? [];
    const appDir = only(runtimeStage, 'WORKDIR').getArgumentsContent() ?? '';
    symlinkSync(join(app, posix.relative(appDir, target ?? '')), join(commands, basename(link ?? '')));
    const image = properties(runtimeStage, 'ENV');
    env = {
      // The executable's `#!/usr/bin/env node` finds this Node.js, as the image's finds its own.
      PATH: `${commands}:${dirname(process.execPath)}:/usr/bin:/bin`,
      // Anything written to the home or temporary folder would fail too.
      HOME: app,
      TMPDIR: app,
      ...image,
      // The image's volume is /data; here a folder of the test's own.
      DATABASE_URL: (image.DATABASE_URL as string).replace('/data/', `${data}/`),
      PORT: String(await freePort()),
      HOST: '127.0.0.1',
    };
  });
  after(() => {
    rmSync(app, { recursive: true, force: true });
    rmSync(data, { recursive: true, force: true });
    rmSync(commands, { recursive: true, force: true });
  });

  /** `safety-api ARGS` as the image runs it: by the name its ENTRYPOINT and HEALTHCHECK give. */
  function safetyApi(args: string[]): ChildProcessWithoutNullStreams {
    const [command] = json(only(runtimeStage, 'ENTRYPOINT'));
    return spawn(command as string, args, { cwd: app, env, ...NOBODY });
  }

  test('serves as an unprivileged user from a read-only folder, answers healthcheck, stops cleanly on the stop signal', async () => {
    const unchanged = snapshot(app);
    const server = safetyApi(json(only(runtimeStage, 'CMD')));
    let output = '';
    server.stdout.on('data', (d) => {
      output += d;
    });
    server.stderr.on('data', (d) => {
      output += d;
    });
    const exited = once(server, 'exit');
    try {
      const deadline = Date.now() + 60_000;
      while (!output.includes('Server listening at')) {
        assert.ok(server.exitCode === null && Date.now() < deadline, `server did not start:\n${output}`);
        await sleep(50);
      }
      const base = `http://127.0.0.1:${env.PORT}`;
      // Each reads files the image must carry: the bundle, the admin assets, Scalar's bundle.
      for (const path of ['/readyz', '/openapi.json', '/docs', '/admin/assets/admin.css', '/admin/sign-in']) {
        const res = await fetch(`${base}${path}`);
        assert.equal(res.status, 200, path);
        await res.arrayBuffer();
      }
      const content = only(runtimeStage, 'HEALTHCHECK').getArgumentsContent() ?? '';
      const [probe, ...args] = JSON.parse(content.slice(content.indexOf('['))) as string[];
      assert.equal(probe, json(only(runtimeStage, 'ENTRYPOINT'))[0]);
      // The probe as the image runs it, with a deadline no busy machine reaches: its answer is the
      // subject here, its 2 s default that of test/cli/healthcheck.test.ts's frozen servers.
      assert.deepEqual(await outputOf(safetyApi([...args, '--timeout', '30'])), {
        code: 0,
        stdout: '',
        stderr: '',
      });
      const version = await outputOf(safetyApi(['--version']));
      assert.deepEqual(version, { code: 0, stdout: `${manifest.version}\n`, stderr: '' });

      server.kill(only(runtimeStage, 'STOPSIGNAL').getArgumentsContent() as NodeJS.Signals);
      const [code] = await Promise.race([exited, sleep(15_000).then(() => ['still running'])]);
      assert.equal(code, 0, output);
      assert.match(output, /"msg":"shutting down"/);
    } finally {
      if (server.exitCode === null) server.kill('SIGKILL');
    }
    assert.doesNotMatch(output, /EACCES|EROFS|EPERM/);
    assert.deepEqual(snapshot(app), unchanged, 'nothing in the read-only folder changed');
    assert.ok(existsSync(join(data, 'safety-api.db')), 'the database is in the data folder');
  });
});
