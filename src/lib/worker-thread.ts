import { type ResourceLimits, Worker } from 'node:worker_threads';

/** A worker thread's entry module: its source file, and its bundle's name in dist/ (scripts/build.mjs). */
export interface WorkerEntry {
  source: URL;
  bundle: string;
}

/**
 * Starts a worker thread on `entry`. From the bundle in dist/, every chunk (this one included) sits
 * beside the entry's bundle; from source (tests), the worker loads the entry's TypeScript as the
 * test does, through Node's own type stripping.
 */
export function startWorker(
  entry: WorkerEntry,
  options: { workerData: unknown; resourceLimits: ResourceLimits },
): Worker {
  const fromSource = import.meta.url.endsWith('.ts');
  return new Worker(fromSource ? entry.source : new URL(`./${entry.bundle}`, import.meta.url), options);
}
