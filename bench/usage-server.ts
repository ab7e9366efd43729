import pino from 'pino';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { openRuntime } from '../src/runtime.ts';

/**
 * The real application from the same sources, with key usage recording `on` or `off`, for the
 * usage scenario's side-by-side rounds (bench/scenarios/usage.ts). `off` makes the recorder drop
 * every count, so nothing is aggregated and nothing is flushed; the public surface's onResponse
 * hook still calls it, so the difference measured is the counting and the flushing, on top of one
 * synchronous hook call. A bench-only switch: the product has no way to turn usage off.
 */
const recording = process.argv[2];
if (recording !== 'on' && recording !== 'off') throw new Error('usage: usage-server.ts on|off');
const config = loadConfig();
const logger = pino({ level: config.logLevel });
const runtime = await openRuntime(config, logger);
if (recording === 'off') runtime.keyUsage.record = () => {};
const app = await buildApp(config, runtime);
await app.listen({ port: config.port, host: config.host });
