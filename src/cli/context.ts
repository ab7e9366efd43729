import { parseArgs } from 'node:util';
import type { Kysely } from 'kysely';
import { type Config, loadConfig } from '../config.ts';
import { openDatabase } from '../db/database.ts';
import { migrateToLatest } from '../db/migrate.ts';
import type { Database } from '../db/schema.ts';
import { InputError } from '../errors.ts';
import type { Io } from './command.ts';

/** Runs `work` on the database DATABASE_URL names, migrated to the latest schema. */
export async function withDatabase<T>(
  work: (db: Kysely<Database>, config: Config) => Promise<T>,
): Promise<T> {
  const config = loadConfig();
  const handle = openDatabase(config.databaseUrl);
  try {
    await migrateToLatest(handle.db);
    return await work(handle.db, config);
  } finally {
    await handle.destroy();
  }
}

/**
 * `<command> list --account ID [--json]`: the records of one account, as a JSON array or one
 * described line each.
 */
export async function listForAccount<T>(
  args: string[],
  io: Io,
  what: { command: string; empty: string },
  read: (db: Kysely<Database>, accountId: string) => Promise<T[]>,
  describe: (item: T) => string,
): Promise<void> {
  const { values } = parseArgs({
    args,
    options: { account: { type: 'string' }, json: { type: 'boolean', default: false } },
  });
  if (values.account === undefined) throw new InputError(`${what.command} list needs --account ID`);
  const accountId = values.account;
  const items = await withDatabase((db) => read(db, accountId));
  if (values.json) io.out(JSON.stringify(items));
  else if (items.length === 0) io.out(what.empty);
  else for (const item of items) io.out(describe(item));
}
