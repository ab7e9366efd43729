// Bundles the TypeScript sources into dist/ (dependencies stay external but for BUNDLED). The
// executable runs the bundle, so that starting it costs no TypeScript loader: `npm install` builds
// it (prepare), and every script that runs the executable rebuilds it first (a build takes well
// under a second).
//
// A build never takes away a file that running code may load. The bundle's chunks import each
// other by relative path, and a server, a CLI call or a second `npm start` may be loading them
// while a build runs, so each build goes into a folder of its own, dist/<build>/, and
// dist/current, a link to the build in use, is switched to it with one rename: a process that
// resolved dist/current/cli.js before the switch goes on loading the previous build, one started
// after it loads the new one, and none ever finds a chunk missing. bin/safety-api.js resolves the
// link once, at start. A build that is replaced stays for BUILD_RETENTION_MS after that, then the
// next build removes it: processes load their chunks at start, except the importer, whose reading
// thread may start again minutes into a PostgreSQL import.
import { createHash } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  utimesSync,
} from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DIST = join(ROOT, 'dist');
/** The link to the build in use, relative to dist/. */
const CURRENT = 'current';
/** How long a replaced build stays, for the processes that started on it. */
const BUILD_RETENTION_MS = 60 * 60 * 1000;

/**
 * The dependencies the bundle holds instead of loading from node_modules: pure ES modules of
 * hundreds of small files each, which every command loads; resolving and reading them one by one
 * was most of what starting a command cost (docs/performance.md, "Starting a command").
 * Everything else stays external: pg and ioredis above all, which tracing patches as they load.
 */
const BUNDLED = /^(?:typebox|kysely)(?:\/|$)/;

/** Marks every package import external but BUNDLED's (esbuild's `packages: 'external'`, less them). */
const externalPackages = {
  name: 'external-packages',
  setup(builder) {
    builder.onResolve({ filter: /^[^./]/ }, ({ path }) =>
      BUNDLED.test(path) ? undefined : { path, external: true },
    );
  },
};

const unique = () => `${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

/** What a build holds: its files' names and contents, so an unchanged build is not switched to. */
function digest(dir) {
  const hash = createHash('sha256');
  for (const name of readdirSync(dir).sort())
    hash
      .update(name)
      .update('\0')
      .update(readFileSync(join(dir, name)));
  return hash.digest('hex');
}

/** The folder name dist/current points at, or null before the first build. */
function currentBuild() {
  try {
    return readlinkSync(join(DIST, CURRENT));
  } catch {
    return null;
  }
}

/** Marks the build in use as replaced from now on: its retention starts at the switch. */
function retire(current) {
  const now = new Date();
  if (current !== null) {
    if (existsSync(join(DIST, current))) utimesSync(join(DIST, current), now, now);
    return;
  }
  // Before builds had folders of their own, the bundle lay in dist/ itself.
  for (const entry of readdirSync(DIST, { withFileTypes: true })) {
    if (entry.isFile()) utimesSync(join(DIST, entry.name), now, now);
  }
}

/** Removes what in dist/ is neither in use nor within its retention: replaced builds, failed ones. */
function removeStale(now = Date.now()) {
  const inUse = new Set([CURRENT, currentBuild()]);
  for (const name of readdirSync(DIST)) {
    if (inUse.has(name)) continue;
    const path = join(DIST, name);
    // Another build may have renamed its staging folder or link away meanwhile.
    const stat = lstatSync(path, { throwIfNoEntry: false });
    if (stat !== undefined && now - stat.mtimeMs > BUILD_RETENTION_MS)
      rmSync(path, { recursive: true, force: true });
  }
}

export async function buildDist() {
  mkdirSync(DIST, { recursive: true });
  // Written beside the finished builds, at the same depth: the source maps' relative paths hold
  // once the folder is renamed.
  const staging = `.staging-${unique()}`;
  await build({
    entryPoints: {
      cli: join(ROOT, 'src/cli/main.ts'),
      // `safety-api healthcheck` loads only this (bin/safety-api.js): it must answer within 2 s.
      healthcheck: join(ROOT, 'src/cli/healthcheck.ts'),
      'import-writer': join(ROOT, 'src/cli/import-writer.ts'),
      'import-reader': join(ROOT, 'src/import/worker.ts'),
      // Loaded before cli.js when OTEL_* is set (bin/safety-api.js): tracing starts before pg loads.
      'tracing-first': join(ROOT, 'src/telemetry/preload.ts'),
      'account-exporter': join(ROOT, 'src/cli/account-exporter.ts'),
    },
    outdir: join(DIST, staging),
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node22',
    plugins: [externalPackages],
    sourcemap: true,
    logLevel: 'warning',
  });
  const current = currentBuild();
  if (
    current !== null &&
    existsSync(join(DIST, current)) &&
    digest(join(DIST, current)) === digest(join(DIST, staging))
  ) {
    rmSync(join(DIST, staging), { recursive: true, force: true });
  } else {
    const name = `build-${unique()}`;
    renameSync(join(DIST, staging), join(DIST, name));
    retire(current);
    const link = `.link-${unique()}`;
    symlinkSync(name, join(DIST, link));
    // rename(2) replaces the old link in one step: there is always a dist/current.
    renameSync(join(DIST, link), join(DIST, CURRENT));
  }
  removeStale();
}

if (import.meta.url === `file://${process.argv[1]}`) await buildDist();
