#!/usr/bin/env node
// The operator's entry point. Sources are TypeScript, loaded through tsx: there is no build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
process.exitCode = await main(process.argv.slice(2));
