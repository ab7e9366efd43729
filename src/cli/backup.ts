import { parseArgs } from 'node:util';
import { loadConfig } from '../config.ts';
import { InputError } from '../errors.ts';
import { backupSqlite, restoreBackup } from '../services/store-copy.ts';
import type { Command } from './command.ts';
import { copyWithReport } from './copy-store.ts';

const count = (n: number) => n.toLocaleString('en-US');

export const backupCommand: Command = {
  name: 'backup',
  summary: 'Back the SQLite database up into a new file, consistent, while the server serves and imports',
  usage: ['safety-api backup --to FILE'],
  notes: [
    'SQLite only (DATABASE_URL sqlite:PATH): one read transaction (VACUUM INTO), writers go on meanwhile.',
    'FILE must not exist. PostgreSQL: pg_dump and pg_restore (docs/operations.md, "Backups").',
    'Keep WEBHOOK_SECRETS_KEY and OAUTH_JWKS (when set) beside the backup: it needs them to be of use.',
  ],
  example: 'safety-api backup --to /backups/safety-api-2026-01-31.db',
  async run(args, io) {
    const { values } = parseArgs({ args, options: { to: { type: 'string' } } });
    if (values.to === undefined) throw new InputError('usage: safety-api backup --to FILE');
    const result = await backupSqlite(loadConfig().databaseUrl, values.to);
    io.out(
      `Backed up to ${result.file}: ${count(result.bytes)} bytes, ${count(result.rows.accounts ?? 0)} accounts, ` +
        `${count(result.rows.incidents ?? 0)} incidents, in ${(result.ms / 1000).toFixed(1)} s.`,
    );
  },
};

export const restoreCommand: Command = {
  name: 'restore',
  summary: 'Restore a backup file into DATABASE_URL (SQLite or PostgreSQL), which must be empty',
  usage: ['safety-api restore --from FILE'],
  notes: [
    'FILE: made by "safety-api backup" (an older version\'s too: it is migrated on the way). The store',
    'is written in one transaction and compared with the backup by row count and checksum per table.',
  ],
  example:
    'DATABASE_URL=sqlite:/data/safety-api.db safety-api restore --from /backups/safety-api-2026-01-31.db',
  async run(args, io) {
    const { values } = parseArgs({ args, options: { from: { type: 'string' } } });
    if (values.from === undefined) throw new InputError('usage: safety-api restore --from FILE');
    await restoreBackup(values.from, loadConfig().databaseUrl, (options) => copyWithReport(io, options));
  },
};
