import { setFlagsFromString } from 'node:v8';
import pino from 'pino';
import { buildApp } from './app.ts';
import { type Config, loadConfig } from './config.ts';
import { webhookRepository } from './db/repositories/webhooks.ts';
import { traceIdsInLogs } from './logging.ts';
import { openRuntime } from './runtime.ts';
import { activeTracing, startTracing } from './telemetry/tracing.ts';

/**
 * How long a shutdown may take before the process exits anyway: a client that never finishes its
 * request, or a store that does not answer, must not keep an instance that was told to stop alive.
 * Well within the usual grace before an orchestrator kills the process (Kubernetes: 30 s).
 */
const SHUTDOWN_DEADLINE_MS = 10_000;
/**
 * During shutdown, how often connections that fell idle are closed. A connection whose request
 * was in flight when shutdown began stays open after its response (keep-alive, 72 s): Node's
 * `server.close()` closes only the connections idle at that moment.
 */
const IDLE_SWEEP_INTERVAL_MS = 100;

/** What the last spans may add to a shutdown: a collector that does not answer delays it no longer. */
const TRACE_FLUSH_MS = 2000;

/**
 * How far V8 lets its old generation grow past what was alive after its last full collection
 * before it collects again: 100%, twice the live heap. V8's own factor goes up to 4×, and on
 * PostgreSQL, whose row objects outlive the young generation, that let the server's old generation
 * hold several times what was alive after a walk of every page; twice the live heap costs some CPU
 * on uncached pages (the figures: docs/performance.md, "Server memory").
 */
const HEAP_GROWING_PERCENT = 100;

/**
 * The V8 setting `serve` makes for its process: `--heap-growing-percent`, unless node was started
 * with one (NODE_OPTIONS does not accept it, node's command line does).
 */
export function heapGrowthFlag(execArgv: readonly string[]): string | null {
  if (execArgv.some((arg) => /^--heap[-_]growing[-_]percent(=|$)/.test(arg))) return null;
  return `--heap-growing-percent=${HEAP_GROWING_PERCENT}`;
}

/**
 * Starts the server and stops it cleanly on SIGINT/SIGTERM: no new connections, requests in
 * flight finish, idle connections are closed, later requests on open connections get 503, the
 * buffered last-use times are written, the stores are closed; all within SHUTDOWN_DEADLINE_MS.
 * The process belongs to this file.
 */
export async function serve(config: Config = loadConfig()): Promise<void> {
  // Set before the server allocates anything: V8 reads it at each full collection.
  const flag = heapGrowthFlag(process.execArgv);
  if (flag !== null) setFlagsFromString(flag);
  // Before the logger and the services: already running when bin/safety-api.js started it.
  if (config.tracing !== null) await startTracing(config.tracing);
  const logger = pino({ level: config.logLevel, ...traceIdsInLogs() });
  const runtime = await openRuntime(config, logger);
  const app = await buildApp(config, runtime);

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'shutting down');
    setTimeout(() => {
      app.log.error(
        { deadlineMs: SHUTDOWN_DEADLINE_MS },
        'shutdown did not finish in time (a request or a store did not end): exiting anyway',
      );
      process.exit(1);
    }, SHUTDOWN_DEADLINE_MS);
    setInterval(() => app.server.closeIdleConnections(), IDLE_SWEEP_INTERVAL_MS);
    try {
      await app.close();
      await runtime.close();
      await activeTracing()?.shutdown(TRACE_FLUSH_MS);
    } catch (error) {
      app.log.error({ err: error }, 'shutdown failed');
      process.exit(1);
    }
    process.exit(0);
  };
  // stop() never rejects: a failed shutdown is logged and exits 1.
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));

  if (config.webhooksAllowPrivate) {
    app.log.warn(
      'WEBHOOKS_ALLOW_PRIVATE=true: webhooks may go to http:// URLs and private addresses (tests and development only)',
    );
  }
  await app.listen({ port: config.port, host: config.host });
  // Deliveries begin once the server is up; they stop with the runtime.
  await runtime.delivery.start();
  if (runtime.mail === null && (await webhookRepository.anyEndpoint(runtime.database.db))) {
    app.log.warn(
      'SMTP_URL is unset: no Super Admin is mailed when a webhook endpoint fails or is disabled, nor before a key expires',
    );
  }
  runtime.mail?.start();
  if (app.metricsListener !== null && config.metricsPort !== null) {
    try {
      const address = await app.metricsListener.listen({
        port: config.metricsPort,
        host: config.metricsHost,
      });
      app.log.info(`metrics listening at ${address}/metrics`);
    } catch (error) {
      // Half a server (API without metrics) would look healthy while its monitoring is blind.
      await app.close();
      await runtime.close();
      throw error;
    }
  }
}
