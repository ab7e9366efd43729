import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import {
  createTestContext,
  ROOT,
  seedAccount,
  seedIncidents,
  seedKey,
  type TestContext,
} from '../helpers.ts';

/**
 * What an integrator does: install the packed SDK into an empty project and run the README's quick
 * start there, against a running server. The tarball's dependencies come from npm's cache when it
 * has them (they are the workspace's), else from the registry.
 */

const run = promisify(execFile);
const SDK = join(ROOT, 'packages/sdk');

describe('the packed SDK', () => {
  let ctx: TestContext;
  let baseUrl: string;
  let apiKey: string;
  const dir = mkdtempSync(join(tmpdir(), 'safety-sdk-pack-'));

  before(async () => {
    ctx = await createTestContext('sqlite');
    await ctx.app.listen({ port: 0, host: '127.0.0.1' });
    baseUrl = `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`;
    const accountId = await seedAccount(ctx.db);
    await seedIncidents(ctx.db, accountId, 5);
    ({ rawKey: apiKey } = await seedKey(ctx.db, accountId));
  });
  after(async () => {
    await ctx.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test(
    'installs into an empty project, where the README quick start runs',
    { timeout: 110_000 },
    async () => {
      // `prepack` builds dist/ with tsc.
      await run('npm', ['pack', '--workspace', '@safety-incident/sdk', '--pack-destination', dir], {
        cwd: ROOT,
        timeout: 60_000,
      });
      const tarball = readdirSync(dir).find((name) => name.endsWith('.tgz'));
      assert.ok(tarball !== undefined, 'npm pack wrote a tarball');

      const project = join(dir, 'project');
      mkdirSync(project);
      writeFileSync(
        join(project, 'package.json'),
        JSON.stringify({ name: 'quick-start', private: true, type: 'module' }),
      );
      await run('npm', ['install', join(dir, tarball), '--prefer-offline', '--no-audit', '--no-fund'], {
        cwd: project,
        timeout: 60_000,
      });

      const quickStart = /## Quick start\n\n```ts\n([\s\S]*?)```/.exec(
        readFileSync(join(SDK, 'README.md'), 'utf8'),
      );
      assert.ok(quickStart?.[1] !== undefined, 'the README has a quick start');
      writeFileSync(join(project, 'quick-start.ts'), quickStart[1]);
      // As an integrator's strict TypeScript project sees it: the installed package's types only.
      await run(
        process.execPath,
        [
          join(ROOT, 'node_modules/typescript/bin/tsc'),
          ...['--strict', '--noEmit', '--skipLibCheck', '--target', 'es2022'],
          ...['--module', 'nodenext', '--moduleResolution', 'nodenext'],
          ...['--types', 'node', '--typeRoots', join(ROOT, 'node_modules/@types'), 'quick-start.ts'],
        ],
        { cwd: project, timeout: 60_000 },
      ).catch((error: { stdout?: string }) => assert.fail(`tsc --strict: ${error.stdout ?? String(error)}`));
      const { stdout } = await run(process.execPath, ['quick-start.ts'], {
        cwd: project,
        env: { ...process.env, SAFETY_API_URL: baseUrl, SAFETY_API_KEY: apiKey },
        timeout: 30_000,
      });
      const lines = stdout.trimEnd().split('\n');
      assert.match(lines[0]!, /^5 incidents, \d+ requests left this hour$/);
      assert.deepEqual(
        lines.slice(1, -1),
        [5, 4, 3, 2, 1].map((n) => `INC-2025-${n} open`),
      );
      assert.equal(lines.at(-1), '404 Incident not found');
    },
  );

  test(
    'npm publish --dry-run passes offline; the tarball holds the built modules, their types, the README and package.json',
    { timeout: 110_000 },
    async () => {
      // Left by an earlier build of a module since removed: a build starts from an empty dist/.
      mkdirSync(join(SDK, 'dist'), { recursive: true });
      writeFileSync(join(SDK, 'dist/removed-module.js'), 'export {};\n');
      const { stdout } = await run('npm', ['publish', '--dry-run', '--json', '--offline'], {
        cwd: SDK,
        timeout: 90_000,
      });
      const published = (JSON.parse(stdout) as Record<string, { id: string; files: { path: string }[] }>)[
        '@safety-incident/sdk'
      ];
      assert.ok(published !== undefined, stdout);
      const { version } = JSON.parse(readFileSync(join(SDK, 'package.json'), 'utf8')) as { version: string };
      assert.equal(published.id, `@safety-incident/sdk@${version}`);
      const modules = readdirSync(join(SDK, 'src'), { recursive: true, encoding: 'utf8' })
        .filter((file) => file.endsWith('.ts'))
        .map((file) => file.slice(0, -'.ts'.length));
      assert.ok(modules.includes('index') && modules.includes('generated/openapi'), modules.join(', '));
      assert.deepEqual(
        published.files.map(({ path }) => path).sort(),
        [
          'README.md',
          'package.json',
          ...modules.flatMap((module) => [`dist/${module}.d.ts`, `dist/${module}.js`]),
        ].sort(),
      );
    },
  );
});
