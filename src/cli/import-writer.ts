import { parentPort, workerData } from 'node:worker_threads';
import { ConfigError, loadConfig } from '../config.ts';
import { isStoreUnavailable } from '../db/store-health.ts';
import { InputError } from '../errors.ts';
import { importFile } from '../import/import.ts';
import { activeTracing, startTracing } from '../telemetry/tracing.ts';
import { withDatabase } from './context.ts';
import type { ImportRequest, WriterMessage } from './import.ts';

/**
 * Worker thread of `safety-api import` (see `importInWorker` in import.ts): opens the database,
 * runs the import and posts its summary and warnings, or why it failed.
 */

if (parentPort === null) throw new Error('import writer: must run as a worker thread');
const port = parentPort;
const { path } = workerData as ImportRequest;

function post(message: WriterMessage): void {
  port.postMessage(message);
}

/** What the import's last spans may add to its end: a collector that does not answer delays it no longer. */
const TRACE_FLUSH_MS = 2000;

try {
  // With OTEL_* configured, the import is a trace: a span for it, one per batch, one per statement.
  const { tracing } = loadConfig();
  if (tracing !== null) await startTracing(tracing);
  // The import's warnings go back with its summary, for the main thread's io.
  const warnings: string[] = [];
  const summary = await withDatabase({ warn: (line) => warnings.push(line) }, (db, config) =>
    importFile(db, path, { retentionDays: config.changesRetentionDays }),
  );
  await activeTracing()?.shutdown(TRACE_FLUSH_MS);
  post({ summary, warnings });
} catch (error) {
  const kind =
    error instanceof InputError
      ? 'input'
      : error instanceof ConfigError
        ? 'config'
        : isStoreUnavailable(error)
          ? 'store'
          : 'other';
  post({ failure: { message: error instanceof Error ? error.message : String(error), kind } });
}
