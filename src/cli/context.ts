import { parseArgs } from 'node:util';
import type { Kysely } from 'kysely';
import { SharedGeneration } from '../auth/shared-generation.ts';
import { type Config, loadConfig } from '../config.ts';
import { type DatabaseHandle, openDatabase } from '../db/database.ts';
import { migrateThrough } from '../db/migrate.ts';
import type { Database } from '../db/schema.ts';
import { InputError } from '../errors.ts';
import { openRedis, redisReady } from '../redis.ts';
import type { Io } from './command.ts';

/**
 * Runs `work` on the database DATABASE_URL names, migrated to the latest schema, then tells the
 * servers that it may have changed keys or accounts (`bumpSharedGeneration`). Every writing command
 * bumps, whatever it wrote: a needless bump costs each server one read per key, a missing one stale
 * rows. `readOnly` work (the lists) has nothing to tell, and so keeps working while Redis is away.
 */
export async function withDatabase<T>(
  work: (db: Kysely<Database>, config: Config) => Promise<T>,
  { readOnly = false }: { readOnly?: boolean } = {},
): Promise<T> {
  const config = loadConfig();
  await migrateThrough(config.databaseUrl, config.migrationDatabaseUrl);
  const handle = openDatabase(config.databaseUrl);
  try {
    if (readOnly) return await work(handle.db, config);
    let result: T;
    try {
      result = await work(handle.db, config);
    } catch (error) {
      // A failed command may still have committed part of its work; its own error is the one to show.
      await bumpSharedGeneration(handle, config).catch(() => {});
      throw error;
    }
    await bumpSharedGeneration(handle, config);
    return result;
  } finally {
    await handle.destroy();
  }
}

/**
 * Bumps the shared generation of PostgreSQL deployments with Redis, after the command's commit and
 * before it returns, so that every server reads keys and accounts again at its next request. SQLite
 * servers see every commit through their commit watch, and PostgreSQL servers without Redis read
 * every request, so there is nothing to bump for them.
 */
async function bumpSharedGeneration(handle: DatabaseHandle, config: Config): Promise<void> {
  if (handle.store !== 'postgres' || config.redisUrl === null) return;
  const redis = openRedis(config.redisUrl);
  try {
    if (!(await redisReady(redis))) throw new Error('Redis is not answering');
    await (await SharedGeneration.open(redis, handle.db)).bump();
  } catch (error) {
    throw new Error(
      `The change is saved, but the servers could not be told (${error instanceof Error ? error.message : String(error)}): ` +
        'run "safety-api cache bump" once Redis answers.',
    );
  } finally {
    redis.disconnect();
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
  const items = await withDatabase((db) => read(db, accountId), { readOnly: true });
  if (values.json) io.out(JSON.stringify(items));
  else if (items.length === 0) io.out(what.empty);
  else for (const item of items) io.out(describe(item));
}
