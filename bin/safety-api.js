#!/usr/bin/env node
// The operator's entry point: runs the bundle that `npm install` / `npm run build` writes to
// dist/current (scripts/build.mjs). The link is resolved once, here: every chunk this process loads
// later comes from the same build, whatever builds run meanwhile.
import { existsSync, realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const args = process.argv.slice(2);
// `healthcheck` runs every few seconds in a container and must answer within 2 s: it loads a
// bundle of its own instead of the whole CLI (its --help is the CLI's).
const probe = args[0] === 'healthcheck' && !args.includes('--help') && !args.includes('-h');
const bundle = new URL(`../dist/current/${probe ? 'healthcheck' : 'cli'}.js`, import.meta.url);
if (!existsSync(bundle)) {
  process.stderr.write('safety-api: dist/ is missing: run "npm install" or "npm run build" first\n');
  process.exit(1);
}
process.setSourceMapsEnabled(true);
const entry = pathToFileURL(realpathSync(bundle)).href;
if (probe) {
  const { healthcheck } = await import(entry);
  process.exitCode = await healthcheck(args.slice(1));
} else {
  // Tracing, when OTEL_* configures it, must start before the server's bundle imports pg and
  // ioredis (src/telemetry/preload.ts); without OTEL_* variables nothing of it is loaded.
  if (args[0] === 'serve' && Object.keys(process.env).some((name) => name.startsWith('OTEL_'))) {
    // Beside the entry already resolved: the same build.
    const { startTracingFirst } = await import(new URL('tracing-first.js', entry).href);
    await startTracingFirst();
  }
  const { main } = await import(entry);
  process.exitCode = await main(args);
}
