import { parseArgs } from 'node:util';
import { InputError } from '../errors.ts';
import { type ApiKeyView, apiKeyService } from '../services/api-key-service.ts';
import { keyUsageService, parseDays } from '../services/key-usage-service.ts';
import { type Command, type CommandGroup, positionals } from './command.ts';
import { listForAccount, withDatabase } from './context.ts';

const ACTOR = 'cli';
const KEY_ID = '0b9d1c52-7f3e-4a6b-9c2d-5e8f7a1b3c4d';

function describe(key: ApiKeyView): string {
  return [
    key.id,
    key.prefix,
    key.state,
    key.scope,
    `"${key.name}"`,
    `last used ${key.last_used_at ?? 'never'}`,
    `expires ${key.expires_at ?? 'never'}`,
  ].join('  ');
}

const create: Command = {
  name: 'keys create',
  summary: 'Create an API key for an account and print its raw value, once',
  usage: [
    'safety-api keys create --account ID --name NAME [--scope read|read-write|admin] [--expires-at ISO] [--json]',
  ],
  notes: [
    '--scope       read (default), read-write or admin',
    '--expires-at  a date (2027-03-01: usable through that day, UTC) or a date-time with a time zone',
    '--json        one JSON object with id, key (the raw value), prefix, scope, state, expires_at, …',
  ],
  example: 'safety-api keys create --account 0b5e6c1a-8d2f-4c3e-9a7b-1f2e3d4c5b6a --name "Power BI" --json',
  async run(args, io) {
    const { values } = parseArgs({
      args,
      options: {
        account: { type: 'string' },
        name: { type: 'string' },
        scope: { type: 'string' },
        'expires-at': { type: 'string' },
        json: { type: 'boolean', default: false },
      },
    });
    const { account, name } = values;
    if (account === undefined || name === undefined) {
      throw new InputError('keys create needs --account ID and --name NAME');
    }
    const { key, rawKey } = await withDatabase(io, (db) =>
      apiKeyService.create(db, {
        accountId: account,
        name,
        scope: values.scope,
        expiresAt: values['expires-at'] ?? null,
        actor: ACTOR,
      }),
    );
    if (values.json) {
      io.out(JSON.stringify({ ...key, key: rawKey }));
    } else {
      io.out(`Created ${describe(key)}`);
      io.out(`API key (shown once, store it now): ${rawKey}`);
    }
  },
};

const list: Command = {
  name: 'keys list',
  summary: "List an account's API keys (never their raw values)",
  usage: ['safety-api keys list --account ID [--json]'],
  example: 'safety-api keys list --account 0b5e6c1a-8d2f-4c3e-9a7b-1f2e3d4c5b6a --json',
  run: (args, io) =>
    listForAccount(
      args,
      io,
      { command: 'keys', empty: 'No API keys.' },
      (accountId) => withDatabase(io, (db) => apiKeyService.list(db, accountId), { tellServers: false }),
      describe,
    ),
};

const rename: Command = {
  name: 'keys rename',
  summary: 'Rename a key (its state and scope stay as they are)',
  usage: ['safety-api keys rename KEY_ID NAME'],
  example: `safety-api keys rename ${KEY_ID} "Power BI (finance)"`,
  async run(args, io) {
    const [keyId, name] = positionals(args, 2, 'safety-api keys rename KEY_ID NAME') as [string, string];
    io.out(describe(await withDatabase(io, (db) => apiKeyService.rename(db, keyId, name, ACTOR))));
  },
};

const scope: Command = {
  name: 'keys scope',
  summary: "Change a key's scope: read, read-write or admin",
  usage: ['safety-api keys scope KEY_ID SCOPE'],
  example: `safety-api keys scope ${KEY_ID} read`,
  async run(args, io) {
    const [keyId, newScope] = positionals(args, 2, 'safety-api keys scope KEY_ID SCOPE') as [string, string];
    io.out(describe(await withDatabase(io, (db) => apiKeyService.setScope(db, keyId, newScope, ACTOR))));
  },
};

const roll: Command = {
  name: 'keys roll',
  summary: 'Replace a key: a successor with the same scope and expiry, the old key expiring after an overlap',
  usage: ['safety-api keys roll KEY_ID [--overlap now|1h|24h|7d] [--json]'],
  notes: [
    '--overlap  how long the old key keeps working beside the new one: now, 1h, 24h (default) or 7d',
    '--json     the new key as keys create --json prints it, plus previous_id and previous_expires_at',
  ],
  example: `safety-api keys roll ${KEY_ID} --overlap 24h --json`,
  async run(args, io) {
    const { values, positionals: ids } = parseArgs({
      args,
      allowPositionals: true,
      options: { overlap: { type: 'string', default: '24h' }, json: { type: 'boolean', default: false } },
    });
    const [keyId] = ids;
    if (keyId === undefined || ids.length !== 1) {
      throw new InputError('usage: safety-api keys roll KEY_ID [--overlap now|1h|24h|7d] [--json]');
    }
    const { key, rawKey, previous } = await withDatabase(io, (db) =>
      apiKeyService.roll(db, keyId, values.overlap, ACTOR),
    );
    if (values.json) {
      io.out(
        JSON.stringify({
          ...key,
          key: rawKey,
          previous_id: previous.id,
          previous_expires_at: previous.expires_at,
        }),
      );
    } else {
      io.out(`Created ${describe(key)}`);
      io.out(`API key (shown once, store it now): ${rawKey}`);
      io.out(`The old key ${previous.id} works until ${previous.expires_at ?? 'never'}`);
    }
  },
};

const usage: Command = {
  name: 'keys usage',
  summary: "A key's requests per hour: successful, client errors and rate limited",
  usage: ['safety-api keys usage KEY_ID [--days N] [--json]'],
  notes: [
    '--days  how many days back, 1 to 30 (default 30); hours without requests are left out',
    '--json  { key_id, hours: [{ hour, ok, client_errors, rate_limited }], totals }',
    'Servers add their counts to the store about every 10 seconds.',
  ],
  example: `safety-api keys usage ${KEY_ID} --days 7 --json`,
  async run(args, io) {
    const { values, positionals: ids } = parseArgs({
      args,
      allowPositionals: true,
      options: { days: { type: 'string', default: '30' }, json: { type: 'boolean', default: false } },
    });
    const [keyId] = ids;
    if (keyId === undefined || ids.length !== 1) {
      throw new InputError('usage: safety-api keys usage KEY_ID [--days N] [--json]');
    }
    const days = parseDays(values.days);
    const report = await withDatabase(io, (db) => keyUsageService.report(db, keyId, days), {
      tellServers: false,
    });
    if (values.json) {
      io.out(JSON.stringify(report));
      return;
    }
    const { totals } = report;
    io.out(
      `Last ${days} days: ${totals.ok} successful, ${totals.client_errors} client errors, ${totals.rate_limited} rate limited`,
    );
    for (const hour of report.hours) {
      io.out(
        `${hour.hour}  ok ${hour.ok}  client errors ${hour.client_errors}  rate limited ${hour.rate_limited}`,
      );
    }
  },
};

const STATE_CHANGES = {
  disable: 'Disable a key: requests with it get 401 until it is enabled again',
  enable: 'Enable a disabled key again',
  revoke: 'Revoke a key for good: requests with it get 401 API_KEY_INVALID from now on',
} as const;

const stateChanges: Command[] = (Object.keys(STATE_CHANGES) as (keyof typeof STATE_CHANGES)[]).map(
  (action) => ({
    name: `keys ${action}`,
    summary: STATE_CHANGES[action],
    usage: [`safety-api keys ${action} KEY_ID`],
    example: `safety-api keys ${action} ${KEY_ID}`,
    async run(args, io) {
      const [keyId] = positionals(args, 1, `safety-api keys ${action} KEY_ID`) as [string];
      io.out(describe(await withDatabase(io, (db) => apiKeyService[action](db, keyId, ACTOR))));
    },
  }),
);

export const keysCommands: CommandGroup = {
  name: 'keys',
  summary: 'Manage API keys: every change applies to a running server at its next request',
  subcommands: [create, list, rename, ...stateChanges, scope, roll, usage],
};
