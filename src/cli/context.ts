import { parseArgs } from 'node:util';
import type { Kysely } from 'kysely';
import { KEY_ROW_MAX_AGE_MS } from '../auth/key-lookup.ts';
import { type Config, loadConfig } from '../config.ts';
import { type DatabaseHandle, openDatabase, seesOtherProcessesCommits } from '../db/database.ts';
import { migrateThrough } from '../db/migrate.ts';
import type { Database } from '../db/schema.ts';
import { InputError } from '../errors.ts';
import type { Io } from './command.ts';

/**
 * Runs `work` on the database DATABASE_URL names, migrated to the latest schema, then tells the
 * servers that it may have changed keys or accounts (`bumpSharedGeneration`). Every writing command
 * tells them, whatever it wrote: a needless bump costs each server one read per key, a missing one
 * stale rows. Work with nothing to tell (`tellServers: false`: the lists, and the writers of what
 * servers never keep, such as webhook endpoints) keeps working while Redis is away.
 *
 * The servers not being told does not make the command fail: its change is committed, and its
 * result may be something shown only once (a new key or secret), so the result is returned as
 * usual and the failure becomes one warning on `io`, saying when the servers will see the change.
 */
export async function withDatabase<T>(
  io: Pick<Io, 'warn'>,
  work: (db: Kysely<Database>, config: Config, database: DatabaseHandle) => Promise<T>,
  { tellServers = true }: { tellServers?: boolean } = {},
): Promise<T> {
  const config = loadConfig();
  await migrateThrough(config.databaseUrl, config.migrationDatabaseUrl);
  const handle = openDatabase(config.databaseUrl);
  try {
    if (!tellServers) return await work(handle.db, config, handle);
    let result: T;
    try {
      result = await work(handle.db, config, handle);
    } catch (error) {
      // A failed command may still have committed part of its work; its own error is the one to show.
      await bumpSharedGeneration(handle.db, config).catch(() => {});
      throw error;
    }
    await bumpSharedGeneration(handle.db, config).catch((error: unknown) => {
      io.warn(
        `the change is saved, but the servers could not be told (${reason(error)}): ` +
          'servers that cannot reach Redis either see it now (they read the database at every request), ' +
          `the others within ${KEY_ROW_MAX_AGE_MS / 1000} s, or at their next request after "safety-api cache bump"`,
      );
    });
    return result;
  } finally {
    await handle.destroy();
  }
}

const reason = (error: unknown) => (error instanceof Error ? error.message : String(error));

/**
 * Bumps the shared generation of PostgreSQL deployments with Redis, after a commit, so that every
 * server reads keys and accounts again at its next request; throws if Redis does not take it. SQLite
 * servers see every commit through their commit watch, and PostgreSQL servers without Redis read
 * every request, so there is nothing to bump for them.
 */
export async function bumpSharedGeneration(db: Kysely<Database>, config: Config): Promise<void> {
  if (seesOtherProcessesCommits(config.databaseUrl) || config.redisUrl === null) return;
  // Loaded only here: most commands on most deployments never talk to Redis, and its client is a
  // good part of a command's start.
  const [{ openRedis, redisReady }, { SharedGeneration }] = await Promise.all([
    import('../redis.ts'),
    import('../auth/shared-generation.ts'),
  ]);
  const redis = openRedis(config.redisUrl);
  try {
    if (!(await redisReady(redis))) throw new Error('Redis is not answering');
    await (await SharedGeneration.open(redis, db)).bump();
  } finally {
    redis.disconnect();
  }
}

/**
 * `<command> list --account ID [--json]`: the records of one account, as a JSON array or one
 * described line each. `read` reads them as a list does: without telling the servers.
 */
export async function listForAccount<T>(
  args: string[],
  io: Io,
  what: { command: string; empty: string },
  read: (accountId: string) => Promise<T[]>,
  describe: (item: T) => string,
): Promise<void> {
  const { values } = parseArgs({
    args,
    options: { account: { type: 'string' }, json: { type: 'boolean', default: false } },
  });
  if (values.account === undefined) throw new InputError(`${what.command} list needs --account ID`);
  const accountId = values.account;
  const items = await read(accountId);
  if (values.json) io.out(JSON.stringify(items));
  else if (items.length === 0) io.out(what.empty);
  else for (const item of items) io.out(describe(item));
}
