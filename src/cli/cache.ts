import { loadConfig } from '../config.ts';
import { storeOf } from '../db/database.ts';
import type { Command, CommandGroup } from './command.ts';
import { withDatabase } from './context.ts';

const bump: Command = {
  name: 'cache bump',
  summary: 'Make every server read keys and accounts from the database again, after a change made in SQL',
  usage: ['safety-api cache bump'],
  notes: [
    'PostgreSQL with REDIS_URL: servers reuse key and account rows until a writer bumps the generation in Redis.',
    'The other commands and the admin panel bump by themselves; only changes made directly in SQL need this.',
  ],
  example:
    'DATABASE_URL=postgres://app@db.internal/safety REDIS_URL=redis://cache.internal safety-api cache bump',
  async run(_args, io) {
    const config = loadConfig();
    if (storeOf(config.databaseUrl) !== 'postgres' || config.redisUrl === null) {
      io.out(
        'Nothing to bump: without PostgreSQL and REDIS_URL, servers see every commit at their next request.',
      );
      return;
    }
    // Opening the database is what bumps: every command bumps after its work, here an empty one.
    await withDatabase(async () => {});
    io.out('Bumped: every server reads keys and accounts from the database at its next request.');
  },
};

export const cacheCommands: CommandGroup = {
  name: 'cache',
  summary: 'The servers’ shared cache generation (PostgreSQL with Redis)',
  subcommands: [bump],
};
