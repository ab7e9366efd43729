import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, ENVIRONMENT, loadConfig } from '../config.ts';
import { isStoreUnavailable } from '../db/store-health.ts';
import { InputError } from '../errors.ts';
import { PROJECT_ROOT } from '../paths.ts';
import { type Command, type CommandGroup, commandHelp, groupHelp, type Io } from './command.ts';

// A command loads only its own module, and that module what it uses: `keys create` does not load
// the server, the importer, the webhook sender or the driver of the other store, an unknown command
// or a --version loads nothing of them. Starting the CLI is most of what a quick command costs.

const serve: Command = {
  name: 'serve',
  summary: 'Start the HTTP server (applies pending migrations first); configured by environment',
  usage: ['safety-api serve'],
  notes: [
    'Environment (the README\'s "Configuration" says more):',
    ...Object.entries(ENVIRONMENT).map(
      ([name, { default: fallback, doc }]) =>
        `  ${name}${fallback === null ? '' : `=${fallback}`}: ${doc.replaceAll('`', '')}`,
    ),
  ],
  example: 'DATABASE_URL=postgres://app@db.internal/safety PORT=8080 safety-api serve',
  async run() {
    const { serve: startServer } = await import('../server.ts');
    await startServer(loadConfig());
  },
};

const migrate: Command = {
  name: 'migrate',
  summary: 'Apply pending database migrations (serve also does this at start)',
  usage: ['safety-api migrate'],
  notes: [
    'Upgrades: run it with the new release before its instances; those of the previous release keep',
    'serving when every new migration is additive (docs/deployment.md, "Upgrades"). Processes started',
    'together migrate once: the others wait for it.',
  ],
  example: 'DATABASE_URL=sqlite:./data/safety-api.db safety-api migrate',
  async run(_args, io) {
    const config = loadConfig();
    const { migrateThrough } = await import('../db/migrate.ts');
    const { applied, newer } = await migrateThrough(config.databaseUrl, config.migrationDatabaseUrl, {
      onWait: () => io.out('Another process is applying migrations: waiting for it.'),
    });
    io.out(applied.length === 0 ? 'Database is up to date.' : `Applied ${applied.join(', ')}.`);
    if (newer.length > 0) {
      io.out(
        `It also has additive migrations of a newer release (${newer.join(', ')}): this release runs on it.`,
      );
    }
  },
};

const demo: Command = {
  name: 'demo',
  summary: 'Create a fresh demo database, print a demo API key once, and serve it (npm run demo)',
  usage: ['safety-api demo'],
  notes: ['Refuses to start, changing nothing, when PORT is already taken (a demo already running).'],
  example: 'PORT=8081 safety-api demo',
  async run(args, io) {
    const { demoCommand } = await import('./demo.ts');
    await demoCommand(args, io);
  },
};

/** Every command and group, in the order of the overview, each loaded when it is asked for. */
const COMMANDS: [name: string, load: () => Promise<Command | CommandGroup>][] = [
  ['serve', async () => serve],
  ['migrate', async () => migrate],
  ['import', async () => (await import('./import.ts')).importCommand],
  ['demo', async () => demo],
  ['healthcheck', async () => (await import('./healthcheck.ts')).healthcheckCommand],
  ['accounts', async () => (await import('./accounts.ts')).accountsCommands],
  ['keys', async () => (await import('./keys.ts')).keysCommands],
  ['users', async () => (await import('./users.ts')).usersCommands],
  ['oauth-clients', async () => (await import('./oauth-clients.ts')).oauthClientsCommands],
  ['webhooks', async () => (await import('./webhooks.ts')).webhooksCommands],
  ['cache', async () => (await import('./cache.ts')).cacheCommands],
  ['copy-store', async () => (await import('./copy-store.ts')).copyStoreCommand],
  ['backup', async () => (await import('./backup.ts')).backupCommand],
  ['restore', async () => (await import('./backup.ts')).restoreCommand],
];

const isGroup = (entry: Command | CommandGroup): entry is CommandGroup => 'subcommands' in entry;

function version(): string {
  const manifest = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as {
    version: string;
  };
  return manifest.version;
}

async function overview(): Promise<string> {
  const entries = await Promise.all(COMMANDS.map(([, load]) => load()));
  const lines = entries.flatMap((entry) => (isGroup(entry) ? entry.subcommands : [entry]));
  const width = Math.max(...lines.map((c) => c.name.length));
  return [
    'safety-api: the Safety Incident API server and its operator commands',
    '',
    'usage: safety-api COMMAND [OPTIONS]',
    '',
    'commands:',
    ...lines.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    'Every command reads DATABASE_URL (default sqlite:./data/safety-api.db); a change made by a command',
    'applies to a running server at its next request.',
    'Run "safety-api COMMAND --help" for its options and an example; "safety-api --version" for the version.',
  ].join('\n');
}

const wantsHelp = (args: string[]) => args.includes('--help') || args.includes('-h');

/** What `argv` names: a command with its arguments, a group's help, or an InputError. */
async function resolve(argv: string[]): Promise<{ help: string } | { command: Command; args: string[] }> {
  const [name, ...rest] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h')
    return { help: await overview() };
  const load = COMMANDS.find(([commandName]) => commandName === name)?.[1];
  if (load === undefined) {
    throw new InputError(`unknown command "${name}" (run "safety-api --help" for the list)`);
  }
  const entry = await load();
  if (!isGroup(entry)) return wantsHelp(rest) ? { help: commandHelp(entry) } : { command: entry, args: rest };

  const [action, ...args] = rest;
  if (action === undefined || action === '--help' || action === '-h') return { help: groupHelp(entry) };
  const command = entry.subcommands.find((c) => c.name === `${entry.name} ${action}`);
  if (command === undefined) {
    const names = entry.subcommands.map((c) => c.name.slice(entry.name.length + 1));
    const expected = names.length === 1 ? names[0] : `${names.slice(0, -1).join(', ')} or ${names.at(-1)}`;
    throw new InputError(`unknown ${entry.name} action "${action}": expected ${expected}`);
  }
  return wantsHelp(args) ? { help: commandHelp(command) } : { command, args };
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

const stdio = { out: (line: string) => process.stdout.write(`${line}\n`), readStdin };

/**
 * Runs one command; returns the exit code. Failures are one line on standard error, and so is each
 * warning (`Io.warn`), after everything the command printed.
 */
export async function main(argv: string[], io: Omit<Io, 'warn'> = stdio): Promise<number> {
  const warnings: string[] = [];
  const commandIo: Io = { out: io.out, readStdin: io.readStdin, warn: (line) => warnings.push(line) };
  try {
    if (argv[0] === '--version' || argv[0] === '-V') {
      io.out(version());
      return 0;
    }
    const resolved = await resolve(argv);
    if ('help' in resolved) {
      io.out(resolved.help);
      // A bare `safety-api` is a mistake worth a non-zero exit; asking for help is not.
      return argv.length === 0 ? 2 : 0;
    }
    await resolved.command.run(resolved.args, commandIo);
    return 0;
  } catch (error) {
    if (error instanceof InputError || error instanceof ConfigError || isParseArgsError(error)) {
      // Node's parseArgs explains some mistakes over several lines: one line, as every error.
      process.stderr.write(`safety-api: ${error.message.replace(/\s*\n\s*/g, ' ')}\n`);
      return 2;
    }
    const message = error instanceof Error ? error.message : String(error);
    // A store that cannot be reached or stopped answering: said so, with the driver's reason.
    process.stderr.write(
      `safety-api: ${isStoreUnavailable(error) ? `the database is unavailable: ${message}` : message}\n`,
    );
    return 1;
  } finally {
    for (const line of warnings) process.stderr.write(`safety-api: warning: ${line}\n`);
  }
}

function isParseArgsError(error: unknown): error is TypeError {
  return error instanceof TypeError && 'code' in error && String(error.code).startsWith('ERR_PARSE_ARGS');
}
