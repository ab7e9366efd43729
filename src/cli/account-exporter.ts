import { createWriteStream } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { ConfigError } from '../config.ts';
import { isStoreUnavailable } from '../db/store-health.ts';
import { InputError } from '../errors.ts';
import { accountDataService } from '../services/account-data-service.ts';
import type { ExportMessage, ExportRequest } from './accounts.ts';
import { withDatabase } from './context.ts';

/**
 * Worker thread of `safety-api accounts export` (see `exportInWorker` in accounts.ts): opens the
 * database, writes the account's export to `path` and posts the lines written per type, or why it
 * failed.
 */

if (parentPort === null) throw new Error('account exporter: must run as a worker thread');
const port = parentPort;
const { accountId, path } = workerData as ExportRequest;

function post(message: ExportMessage): void {
  port.postMessage(message);
}

try {
  const counts = await withDatabase(
    { warn: () => {} },
    (_db, _config, database) =>
      accountDataService.exportAccount(database, accountId, () =>
        // Personal data (names, emails): readable by the owner only.
        createWriteStream(path, { flags: 'wx', mode: 0o600 }),
      ),
    { tellServers: false },
  );
  post({ counts });
} catch (error) {
  const message = error instanceof Error ? error.message : String(error);
  // The file's own failure (no such directory, no permission), told by its code.
  const fileCode =
    error instanceof Error && 'path' in error && error.path === path && 'code' in error
      ? String(error.code)
      : null;
  const kind =
    fileCode !== null
      ? 'file'
      : error instanceof InputError
        ? 'input'
        : error instanceof ConfigError
          ? 'config'
          : isStoreUnavailable(error)
            ? 'store'
            : 'other';
  post({ failure: { message: fileCode ?? message, kind } });
}
