import { parseArgs } from 'node:util';
import { InputError } from '../errors.ts';
import {
  type CopyOptions,
  type CopyResult,
  CopyVerificationError,
  copyStore,
  shownUrl,
  type TableReport,
  tableMatches,
} from '../services/store-copy.ts';
import type { Command, Io } from './command.ts';

const count = (n: number) => n.toLocaleString('en-US');

/**
 * On a terminal, one line per table that counts up while its rows go in (on standard error, so
 * that standard output keeps only the result); elsewhere, nothing until the table is done.
 */
function terminalProgress(): Pick<CopyOptions, 'onProgress'> & { clear(): void } {
  const tty = process.stderr.isTTY === true;
  let shown = false;
  return {
    onProgress(table, copied, total) {
      if (!tty) return;
      const percent = total === 0 ? 100 : Math.floor((copied / total) * 100);
      process.stderr.write(`\r\x1b[K  ${table}  ${count(copied)} / ${count(total)} rows (${percent}%)`);
      shown = true;
    },
    clear() {
      if (shown) process.stderr.write('\r\x1b[K');
      shown = false;
    },
  };
}

/** The verification, one line a table: rows and checksum in the snapshot and in the target. */
export function printVerification(io: Pick<Io, 'out'>, tables: TableReport[]): void {
  const width = Math.max(...tables.map((t) => t.table.length));
  io.out('Verified against the snapshot (rows, checksum: snapshot | target):');
  for (const t of tables) {
    io.out(
      `  ${t.table.padEnd(width)}  ${count(t.rows).padStart(11)} ${t.checksum} | ${count(t.targetRows).padStart(11)} ${t.targetChecksum}  ${tableMatches(t) ? 'ok' : 'MISMATCH'}`,
    );
  }
}

/** Runs a copy with its progress and report on `io`: shared by copy-store and restore. */
export async function copyWithReport(
  io: Pick<Io, 'out'>,
  options: Omit<CopyOptions, 'onProgress' | 'onTableCopied'>,
): Promise<CopyResult> {
  const progress = terminalProgress();
  let result: CopyResult;
  try {
    result = await copyStore({
      ...options,
      onProgress: progress.onProgress,
      onTableCopied(table, rows, ms) {
        progress.clear();
        const rate = ms > 0 && rows > 0 ? `, ${count(Math.round((rows / ms) * 1000))} rows/s` : '';
        io.out(`Copied ${table}: ${count(rows)} rows in ${(ms / 1000).toFixed(1)} s${rate}`);
      },
    });
  } catch (error) {
    progress.clear();
    if (error instanceof CopyVerificationError) printVerification(io, error.tables);
    throw error;
  }
  printVerification(io, result.tables);
  io.out(
    `Copied ${count(result.rows)} rows in ${(result.ms / 1000).toFixed(1)} s from ${shownUrl(options.from)} to ${shownUrl(options.to)}.`,
  );
  return result;
}

export const copyStoreCommand: Command = {
  name: 'copy-store',
  summary:
    'Copy everything but admin sessions, from one consistent snapshot, into an empty store, and verify it',
  usage: ['safety-api copy-store --from URL --to URL [--replace]'],
  notes: [
    'URL: sqlite:PATH or postgres://…, either direction. The source is only read (it may keep serving);',
    'the target must hold no data, is migrated first and written in one transaction, then compared with',
    'the snapshot by row count and checksum per table before the commit. --replace empties a target',
    'that holds data (all of it, admin sessions too) in that same transaction.',
    'Keep WEBHOOK_SECRETS_KEY and OAUTH_JWKS (when set) the same for the servers on the target.',
  ],
  example: 'safety-api copy-store --from sqlite:./data/safety-api.db --to postgres://app@db.internal/safety',
  async run(args, io) {
    const { values } = parseArgs({
      args,
      options: {
        from: { type: 'string' },
        to: { type: 'string' },
        replace: { type: 'boolean', default: false },
      },
    });
    if (values.from === undefined || values.to === undefined)
      throw new InputError('usage: safety-api copy-store --from URL --to URL [--replace]');
    await copyWithReport(io, { from: values.from, to: values.to, replace: values.replace });
  },
};
