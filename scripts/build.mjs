// Bundles the TypeScript sources into dist/ (dependencies stay external). The executable runs the
// bundle, so that starting it costs no TypeScript loader: `npm install` builds it (prepare), and
// every script that runs the executable rebuilds it first (a build takes well under a second).
import { rmSync } from 'node:fs';
import { build } from 'esbuild';

export async function buildDist() {
  // Chunk names carry content hashes: start empty so that no stale chunk lingers.
  rmSync('dist', { recursive: true, force: true });
  await build({
    entryPoints: {
      cli: 'src/cli/main.ts',
      'import-writer': 'src/cli/import-writer.ts',
      'import-reader': 'src/import/worker.ts',
    },
    outdir: 'dist',
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node22',
    packages: 'external',
    sourcemap: true,
    logLevel: 'warning',
  });
}

if (import.meta.url === `file://${process.argv[1]}`) await buildDist();
