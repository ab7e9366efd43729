import { ConfigError, loadConfig } from '../config.ts';
import { openDatabase } from '../db/database.ts';
import { migrateToLatest } from '../db/migrate.ts';
import { InputError } from '../errors.ts';
import { type Io, withDatabase } from './context.ts';
import { KEYS_USAGE, keysCommand } from './keys.ts';
import { OAUTH_CLIENTS_USAGE, oauthClientsCommand } from './oauth-clients.ts';
import { USERS_USAGE, usersCommand } from './users.ts';

const USAGE = `usage:
safety-api serve
safety-api migrate
safety-api import FILE
safety-api demo
${KEYS_USAGE}
${USERS_USAGE}
${OAUTH_CLIENTS_USAGE}`;

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

const stdio: Io = { out: (line) => process.stdout.write(`${line}\n`), readStdin };

// The server and the importer are loaded only by the commands that use them, so that the quick
// commands (keys, users) start fast.

/** Runs one command; returns the exit code. Failures are one line on standard error. */
export async function main(argv: string[], io: Io = stdio): Promise<number> {
  const [command, ...args] = argv;
  try {
    switch (command) {
      case 'serve': {
        const { serve } = await import('../server.ts');
        await serve(loadConfig());
        return 0;
      }
      case 'migrate': {
        const handle = openDatabase(loadConfig().databaseUrl);
        try {
          const applied = await migrateToLatest(handle.db);
          io.out(applied.length === 0 ? 'Database is up to date.' : `Applied ${applied.join(', ')}.`);
        } finally {
          await handle.destroy();
        }
        return 0;
      }
      case 'import': {
        if (args.length !== 1) throw new InputError('usage: safety-api import FILE');
        const { importFile } = await import('../import/import.ts');
        const counts = await withDatabase((db) => importFile(db, args[0] as string));
        io.out(
          `Imported ${counts.account} accounts, ${counts.department} departments, ${counts.location} locations, ` +
            `${counts.user} users, ${counts.incident} incidents.`,
        );
        return 0;
      }
      case 'demo': {
        const { demoCommand } = await import('./demo.ts');
        await demoCommand(args, io);
        return 0;
      }
      case 'keys':
        await keysCommand(args, io);
        return 0;
      case 'users':
        await usersCommand(args, io);
        return 0;
      case 'oauth-clients':
        await oauthClientsCommand(args, io);
        return 0;
      case undefined:
      case 'help':
      case '--help':
        io.out(USAGE);
        return command === undefined ? 2 : 0;
      default:
        throw new InputError(`unknown command "${command}" (run "safety-api help" for the list)`);
    }
  } catch (error) {
    if (error instanceof InputError || error instanceof ConfigError) {
      process.stderr.write(`safety-api: ${error.message}\n`);
      return 2;
    }
    if (
      error instanceof Error &&
      error.name === 'TypeError' &&
      'code' in error &&
      String(error.code).startsWith('ERR_PARSE_ARGS')
    ) {
      process.stderr.write(`safety-api: ${error.message}\n`);
      return 2;
    }
    process.stderr.write(`safety-api: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}
