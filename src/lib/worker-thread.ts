import { type ResourceLimits, Worker } from 'node:worker_threads';

/** A worker thread's entry module: its source file, and its bundle's name in dist/ (scripts/build.mjs). */
export interface WorkerEntry {
  source: URL;
  bundle: string;
}

/**
 * Starts a worker thread on `entry`. From the bundle in dist/, every chunk (this one included) sits
 * beside the entry's bundle. From source (tests, under tsx), the worker registers tsx before it
 * loads the entry: Node does not apply the parent's module hooks to a worker's entry module.
 */
export function startWorker(
  entry: WorkerEntry,
  options: { workerData: unknown; resourceLimits: ResourceLimits },
): Worker {
  if (!import.meta.url.endsWith('.ts')) {
    return new Worker(new URL(`./${entry.bundle}`, import.meta.url), options);
  }
  const tsx = JSON.stringify(import.meta.resolve('tsx/esm/api'));
  const source = JSON.stringify(entry.source.href);
  return new Worker(`import(${tsx}).then((tsx) => { tsx.register(); return import(${source}); });`, {
    ...options,
    eval: true,
    execArgv: [],
  });
}
