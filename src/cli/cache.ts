import { KEY_ROW_MAX_AGE_MS } from '../auth/key-lookup.ts';
import { loadConfig } from '../config.ts';
import { seesOtherProcessesCommits } from '../db/database.ts';
import type { Command, CommandGroup } from './command.ts';
import { bumpSharedGeneration, withDatabase } from './context.ts';

const AGE = `${KEY_ROW_MAX_AGE_MS / 1000} s`;

const bump: Command = {
  name: 'cache bump',
  summary: 'Make every server read keys and accounts from the database again, after a change made in SQL',
  usage: ['safety-api cache bump'],
  notes: [
    `PostgreSQL with REDIS_URL: servers reuse key and account rows until a writer bumps the generation in Redis, ${AGE} at most.`,
    'The other commands and the admin panel bump by themselves. Run it after a change made directly in SQL, or after a',
    `command warned that the servers could not be told, to have every server see the change now rather than within ${AGE}.`,
    'Exits 1 when Redis does not take the bump.',
  ],
  example:
    'DATABASE_URL=postgres://app@db.internal/safety REDIS_URL=redis://cache.internal safety-api cache bump',
  async run(_args, io) {
    const config = loadConfig();
    if (seesOtherProcessesCommits(config.databaseUrl) || config.redisUrl === null) {
      io.out(
        'Nothing to bump: without PostgreSQL and REDIS_URL, servers see every commit at their next request.',
      );
      return;
    }
    // The bump is this command's own work, so Redis not taking it is its failure: no warning, an error.
    await withDatabase(
      io,
      (db, config) =>
        bumpSharedGeneration(db, config).catch((error: unknown) => {
          throw new Error(
            `could not bump the generation: ${error instanceof Error ? error.message : String(error)}`,
          );
        }),
      { tellServers: false },
    );
    io.out('Bumped: every server reads keys and accounts from the database at its next request.');
  },
};

export const cacheCommands: CommandGroup = {
  name: 'cache',
  summary: 'The servers’ shared cache generation (PostgreSQL with Redis)',
  subcommands: [bump],
};
