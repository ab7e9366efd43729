import { loadConfig } from '../config.ts';
import { startTracing } from './tracing.ts';

/**
 * Run by bin/safety-api.js before the server's bundle when an OTEL_* variable is set: tracing must
 * start before pg and ioredis are imported for their queries and commands to be traced. A bad
 * configuration is left for the command itself to report, in its usual one line.
 */
export async function startTracingFirst(env: NodeJS.ProcessEnv = process.env): Promise<void> {
  let tracing;
  try {
    tracing = loadConfig(env).tracing;
  } catch {
    return;
  }
  if (tracing !== null) await startTracing(tracing);
}
