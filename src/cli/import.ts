import { once } from 'node:events';
import { ConfigError } from '../config.ts';
import { StoreUnavailableError } from '../db/store-health.ts';
import { InputError } from '../errors.ts';
import type { ImportSummary } from '../import/import.ts';
import { EXPORT_ONLY_TYPES, RECORD_FORMS, RECORD_TYPES } from '../import/validation.ts';
import { startWorker } from '../lib/worker-thread.ts';
import type { Command, Io } from './command.ts';

/** What the import's writing thread (import-writer.ts) is given. */
export interface ImportRequest {
  path: string;
}

/** What the writing thread answers, once. */
export type WriterMessage =
  | { summary: ImportSummary; warnings: string[] }
  | { failure: { message: string; kind: 'input' | 'config' | 'store' | 'other' } };

/**
 * The writing thread's heap. The import holds one batch of records and a few facts per account
 * whatever the file's size, yet V8, left to itself, grows a busy thread's young generation to
 * 128 MiB and its old generation to several times what is alive: a million-incident import peaked
 * near 470 MB on the main thread. These limits, unlike the process's (`NODE_OPTIONS`), are set by
 * the code that starts the thread. The old generation's bound is set as well because V8 sizes its
 * growth by it (with Node's default bound the same import peaked 50–60 MB higher); 512 MB leaves
 * room for what an import keeps per user (its email), some 200 bytes each.
 */
const WRITER_LIMITS = { maxYoungGenerationSizeMb: 12, maxOldGenerationSizeMb: 512 };

/**
 * Runs the import in a worker thread with a bounded heap (WRITER_LIMITS); the thread reads the file
 * in a worker of its own. The main thread only waits: its heap stays as small as at start.
 */
async function importInWorker(path: string, io: Io): Promise<ImportSummary> {
  const worker = startWorker(
    { source: new URL('./import-writer.ts', import.meta.url), bundle: 'import-writer.js' },
    { workerData: { path } satisfies ImportRequest, resourceLimits: WRITER_LIMITS },
  );
  try {
    // Rejects if the thread itself fails (an 'error' event).
    const [message] = (await once(worker, 'message')) as [WriterMessage];
    if ('summary' in message) {
      for (const line of message.warnings) io.warn(line);
      return message.summary;
    }
    const { message: text, kind } = message.failure;
    throw kind === 'input'
      ? new InputError(text)
      : kind === 'config'
        ? new ConfigError(text)
        : kind === 'store'
          ? // One transaction: whatever the store took of it was rolled back.
            new StoreUnavailableError(`${text}; nothing was imported`)
          : new Error(text);
  } finally {
    await worker.terminate();
  }
}

const IMPORTED = RECORD_TYPES.map((type) => RECORD_FORMS[type].plural);

export const importCommand: Command = {
  name: 'import',
  summary: `Load ${IMPORTED.slice(0, -1).join(', ')} and ${IMPORTED.at(-1)} from a .json or .ndjson file, all or nothing`,
  usage: ['safety-api import FILE'],
  notes: ['Records are upserted by id in one transaction; a bad record is named by line and field.'],
  example: 'safety-api import ./exports/northwind.ndjson',
  async run(args, io) {
    if (args.length !== 1) throw new InputError('usage: safety-api import FILE');
    const counts = await importInWorker(args[0] as string, io);
    const deleted = RECORD_TYPES.filter((type) => counts.deleted[type] !== undefined);
    io.out(
      `Imported ${RECORD_TYPES.map((type) => `${counts[type]} ${RECORD_FORMS[type].plural}`).join(', ')}` +
        (deleted.length === 0
          ? '.'
          : `; deleted ${deleted.map((type) => `${counts.deleted[type]} ${RECORD_FORMS[type].plural}`).join(', ')}.`),
    );
    const skipped = EXPORT_ONLY_TYPES.filter((type) => counts.skipped?.[type] !== undefined);
    if (skipped.length > 0) {
      io.out(
        `Skipped ${skipped.map((type) => `${counts.skipped?.[type]} ${type}`).join(', ')} ` +
          '(lines of an accounts export that an import does not restore).',
      );
    }
  },
};
