#!/usr/bin/env node
// The operator's entry point: runs the bundle that `npm install` / `npm run build` writes to
// dist/current (scripts/build.mjs). The link is resolved once, here: every chunk this process loads
// later comes from the same build, whatever builds run meanwhile.
import { existsSync, realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const bundle = new URL('../dist/current/cli.js', import.meta.url);
if (!existsSync(bundle)) {
  process.stderr.write('safety-api: dist/ is missing: run "npm install" or "npm run build" first\n');
  process.exit(1);
}
process.setSourceMapsEnabled(true);
const { main } = await import(pathToFileURL(realpathSync(bundle)).href);
process.exitCode = await main(process.argv.slice(2));
