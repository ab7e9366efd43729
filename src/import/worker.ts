import { type MessagePort, parentPort, workerData } from 'node:worker_threads';
import { InputError } from '../errors.ts';
import {
  CHUNKS_AHEAD,
  countLines,
  incidentKeys,
  type KeysMessage,
  packChunk,
  packKeys,
  type ParsedJson,
  type ReadControl,
  type ReadMessage,
  type ReadRequest,
  type SkippedCounts,
  validatedChunks,
} from './source.ts';

/**
 * Worker thread of an import (see `readInWorker` in import.ts): reads, parses and validates the
 * file and posts its records in chunks, never more than CHUNKS_AHEAD ahead of the main thread.
 * Asked, it also counts the file's records at most, or reads its incident keys (`ReadControl`),
 * beside the reading.
 */

if (parentPort === null) throw new Error('import worker: must run as a worker thread');
const port = parentPort;
const { path, format, now } = workerData as ReadRequest;

const skipped: SkippedCounts = {};
const parsed: ParsedJson = {};
let ahead = 0;
let taken: (() => void) | null = null;
port.on('message', (control: ReadControl) => {
  if (typeof control === 'object') {
    postKeys(control.keys).catch(() => {});
    return;
  }
  if (control === 'count') {
    // A .json file is parsed whole before its first chunk is posted, so it is counted by then.
    const records = format === '.json' ? Promise.resolve(parsed.records ?? 0) : countLines(path);
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

/** The file's incident keys, on `keys`, never more than CHUNKS_AHEAD chunks ahead of the main thread. */
async function postKeys(keys: MessagePort): Promise<void> {
  let keysAhead = 0;
  let keysTaken: (() => void) | null = null;
  keys.on('message', () => {
    keysAhead -= 1;
    keysTaken?.();
  });
  const send = (message: KeysMessage) => keys.postMessage(message);
  try {
    // A .json file's incidents are read from the document the reading parsed.
    for await (const chunk of incidentKeys(path, format, now, parsed)) {
      if (chunk.length === 0) continue;
      while (keysAhead >= CHUNKS_AHEAD) await new Promise<void>((resolve) => (keysTaken = resolve));
      keysAhead += 1;
      send({ keys: packKeys(chunk) });
    }
    send({ done: true });
  } catch (error) {
    send({ failure: (error as Error).message });
  } finally {
    keys.close();
  }
}

try {
  for await (const chunk of validatedChunks(path, format, now, skipped, parsed)) {
    while (ahead >= CHUNKS_AHEAD) await new Promise<void>((resolve) => (taken = resolve));
    ahead += 1;
    post({ chunk: packChunk(chunk) });
  }
  post({ done: true, skipped });
} catch (error) {
  post({ failure: { message: (error as Error).message, input: error instanceof InputError } });
}
