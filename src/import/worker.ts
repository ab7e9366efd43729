import { parentPort, workerData } from 'node:worker_threads';
import { InputError } from '../errors.ts';
import {
  CHUNKS_AHEAD,
  packChunk,
  type ReadMessage,
  type ReadRequest,
  type SkippedCounts,
  validatedChunks,
} from './source.ts';

/**
 * Worker thread of an import (see `readInWorker` in import.ts): reads, parses and validates the
 * file and posts its records in chunks, never more than CHUNKS_AHEAD ahead of the main thread.
 */

if (parentPort === null) throw new Error('import worker: must run as a worker thread');
const port = parentPort;
const { path, format, now } = workerData as ReadRequest;

let ahead = 0;
let taken: (() => void) | null = null;
port.on('message', () => {
  ahead -= 1;
  taken?.();
});

function post(message: ReadMessage): void {
  port.postMessage(message);
}

const skipped: SkippedCounts = {};
try {
  for await (const chunk of validatedChunks(path, format, now, skipped)) {
    while (ahead >= CHUNKS_AHEAD) await new Promise<void>((resolve) => (taken = resolve));
    ahead += 1;
    post({ chunk: packChunk(chunk) });
  }
  post({ done: true, skipped });
} catch (error) {
  post({ failure: { message: (error as Error).message, input: error instanceof InputError } });
}
