import { once } from 'node:events';
import { rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { type AccountRow, accountRepository } from '../db/repositories/accounts.ts';
import { ConfigError } from '../config.ts';
import { StoreUnavailableError } from '../db/store-health.ts';
import { InputError } from '../errors.ts';
import { startWorker } from '../lib/worker-thread.ts';
import { accountDataService, EXPORT_TYPES, type ExportCounts } from '../services/account-data-service.ts';
import type { Command, CommandGroup } from './command.ts';
import { withDatabase } from './context.ts';

const ACCOUNT_ID = '0b5e6c1a-8d2f-4c3e-9a7b-1f2e3d4c5b6a';

/** An account as the operator sees it: the ids other commands take, and its plan. */
function toView(account: AccountRow) {
  return {
    id: account.id,
    name: account.name,
    api_access: account.api_access === 1,
    rate_limit_per_hour: account.rate_limit_per_hour,
    incident_count: account.incident_count,
  };
}

const list: Command = {
  name: 'accounts list',
  summary: 'List the accounts, with the ids the other commands take (--account ID) and their plans',
  usage: ['safety-api accounts list [--json]'],
  example: 'safety-api accounts list --json',
  async run(args, io) {
    const { values } = parseArgs({ args, options: { json: { type: 'boolean', default: false } } });
    const accounts = (
      await withDatabase(io, (db) => accountRepository.listAll(db), { tellServers: false })
    ).map(toView);
    if (values.json) io.out(JSON.stringify(accounts));
    else if (accounts.length === 0) io.out('No accounts: load some with "safety-api import FILE".');
    else
      for (const a of accounts) {
        const plan = a.api_access ? `API access, ${a.rate_limit_per_hour} requests/hour` : 'no API access';
        io.out([a.id, `"${a.name}"`, plan, `${a.incident_count} incidents`].join('  '));
      }
  },
};

/** `12 incidents, 3 api_key, …`: the counts that are not 0, in the order given. */
const described = (counts: Record<string, number>, order: readonly string[]) =>
  order
    .filter((name) => (counts[name] ?? 0) > 0)
    .map((name) => `${counts[name]} ${name}`)
    .join(', ');

/** What the export's thread (account-exporter.ts) is given. */
export interface ExportRequest {
  accountId: string;
  path: string;
}

/** What it answers, once. */
export type ExportMessage =
  | { counts: ExportCounts }
  | { failure: { message: string; kind: 'input' | 'file' | 'config' | 'store' | 'other' } };

/**
 * The export thread's heap. Row objects read from PostgreSQL outlive V8's young generation, which a
 * busy thread otherwise grows to where a million incidents' export peaked at 280–310 MB; with the
 * import writer's bounds it stays near the import's.
 */
const EXPORTER_LIMITS = { maxYoungGenerationSizeMb: 12, maxOldGenerationSizeMb: 512 };

/** Runs the export in a worker thread with a bounded heap; the main thread only waits. */
async function exportInWorker(request: ExportRequest, to: string): Promise<ExportCounts> {
  const worker = startWorker(
    { source: new URL('./account-exporter.ts', import.meta.url), bundle: 'account-exporter.js' },
    { workerData: request, resourceLimits: EXPORTER_LIMITS },
  );
  try {
    // Rejects if the thread itself fails (an 'error' event).
    const [message] = (await once(worker, 'message')) as [ExportMessage];
    if ('counts' in message) return message.counts;
    const { message: text, kind } = message.failure;
    throw kind === 'file'
      ? new InputError(`cannot write "${to}" (${text}): nothing was exported`)
      : kind === 'input'
        ? new InputError(text)
        : kind === 'config'
          ? new ConfigError(text)
          : kind === 'store'
            ? new StoreUnavailableError(text)
            : new Error(text);
  } finally {
    await worker.terminate();
  }
}

const exportAccount: Command = {
  name: 'accounts export',
  summary:
    "Write an account's data to an NDJSON file that import takes back (keys, webhooks, grants and audit trail as well)",
  usage: ['safety-api accounts export --account ID --to FILE'],
  notes: [
    '--to  the file to write, ending in .ndjson; written whole or not at all, readable by its owner only',
    'Records (account, departments, locations, users, incidents) are lines "safety-api import" restores;',
    'api_key, webhook_endpoint, oauth_client, oauth_grant and audit_event lines carry no secret and',
    'are skipped by an import. Read from one snapshot, so the file is consistent while servers write.',
  ],
  example: `safety-api accounts export --account ${ACCOUNT_ID} --to ./northwind.ndjson`,
  async run(args, io) {
    const { values } = parseArgs({
      args,
      options: { account: { type: 'string' }, to: { type: 'string' } },
    });
    const { account, to } = values;
    if (account === undefined || to === undefined) {
      throw new InputError('accounts export needs --account ID and --to FILE');
    }
    if (!to.toLowerCase().endsWith('.ndjson')) {
      throw new InputError(`--to must name a .ndjson file, the format import reads it as (got "${to}")`);
    }
    // Written beside the target and renamed over it at the end: a failed or interrupted export
    // never leaves a partial file under the name given.
    const partial = join(dirname(to), `.${basename(to)}.${process.pid}.partial`);
    let counts: ExportCounts;
    try {
      counts = await exportInWorker({ accountId: account, path: partial }, to);
      await rename(partial, to);
    } catch (error) {
      await rm(partial, { force: true });
      throw error;
    }
    io.out(`Exported account ${account} to ${to}: ${described(counts, EXPORT_TYPES)}.`);
  },
};

const deleteAccount: Command = {
  name: 'accounts delete',
  summary: 'Erase an account and everything of it, in one transaction; its keys stop working at once',
  usage: ['safety-api accounts delete --account ID --confirm ID'],
  notes: [
    '--confirm  the account id again: a mistyped id deletes nothing',
    'Deletes its records, keys and their usage, webhook endpoints and deliveries, OAuth clients,',
    'grants and tokens, admin sessions and audit trail. Prints the rows deleted per table, and logs',
    'them as one JSON line ("account erased") on standard error. Run "accounts export" first to keep a copy.',
  ],
  example: `safety-api accounts delete --account ${ACCOUNT_ID} --confirm ${ACCOUNT_ID}`,
  async run(args, io) {
    const { values } = parseArgs({
      args,
      options: { account: { type: 'string' }, confirm: { type: 'string' } },
    });
    const { account, confirm } = values;
    if (account === undefined || confirm === undefined) {
      throw new InputError('accounts delete needs --account ID and --confirm ID (the same id again)');
    }
    if (confirm !== account) {
      throw new InputError(`--confirm "${confirm}" is not the account id "${account}": nothing was deleted`);
    }
    const counts = await withDatabase(io, async (db, config) => {
      const erased = await accountDataService.erase(db, account);
      // The service log's record of the erasure: what went, never what it held.
      const { default: pino } = await import('pino');
      pino({ level: config.logLevel }, pino.destination({ fd: 2, sync: true })).info(
        { account_id: account, erased },
        'account erased',
      );
      return erased;
    });
    const rows = Object.entries(counts).filter(([, n]) => n > 0);
    io.out(
      `Deleted account ${account}: ${rows.map(([table, n]) => `${table} ${n}`).join(', ')} (rows per table).`,
    );
  },
};

export const accountsCommands: CommandGroup = {
  name: 'accounts',
  summary: 'The accounts (tenants) in the database; they are created and changed by imports',
  subcommands: [list, exportAccount, deleteAccount],
};
