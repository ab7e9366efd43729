#!/usr/bin/env node
// The operator's entry point: runs the bundle that `npm install` / `npm run build` writes to dist/.
import { existsSync } from 'node:fs';

const bundle = new URL('../dist/cli.js', import.meta.url);
if (!existsSync(bundle)) {
  process.stderr.write('safety-api: dist/ is missing: run "npm install" or "npm run build" first\n');
  process.exit(1);
}
process.setSourceMapsEnabled(true);
const { main } = await import(bundle.href);
process.exitCode = await main(process.argv.slice(2));
