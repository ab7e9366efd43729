import { parentPort, workerData } from 'node:worker_threads';
import { InputError } from '../errors.ts';
import {
  CHUNKS_AHEAD,
  countLines,
  packChunk,
  type ReadControl,
  type ReadMessage,
  type ReadRequest,
  type RecordCount,
  type SkippedCounts,
  validatedChunks,
} from './source.ts';

/**
 * Worker thread of an import (see `readInWorker` in import.ts): reads, parses and validates the
 * file and posts its records in chunks, never more than CHUNKS_AHEAD ahead of the main thread.
 * Asked, it also counts the file's records at most (`ReadControl`), beside the reading.
 */

if (parentPort === null) throw new Error('import worker: must run as a worker thread');
const port = parentPort;
const { path, format, now } = workerData as ReadRequest;

const skipped: SkippedCounts = {};
const counted: RecordCount = {};
let ahead = 0;
let taken: (() => void) | null = null;
port.on('message', (control: ReadControl) => {
  if (control === 'count') {
    // A .json file is parsed whole before its first chunk is posted, so it is counted by then.
    const records = format === '.json' ? Promise.resolve(counted.records ?? 0) : countLines(path);
    records.then(
      (recordsAtMost) => post({ recordsAtMost }),
      (error: unknown) => post({ failure: { message: (error as Error).message, input: false } }),
    );
    return;
  }
  ahead -= 1;
  taken?.();
});

function post(message: ReadMessage): void {
  port.postMessage(message);
}

try {
  for await (const chunk of validatedChunks(path, format, now, skipped, counted)) {
    while (ahead >= CHUNKS_AHEAD) await new Promise<void>((resolve) => (taken = resolve));
    ahead += 1;
    post({ chunk: packChunk(chunk) });
  }
  post({ done: true, skipped });
} catch (error) {
  post({ failure: { message: (error as Error).message, input: error instanceof InputError } });
}
