import { parseArgs } from 'node:util';
import { type AccountRow, accountRepository } from '../db/repositories/accounts.ts';
import type { Command, CommandGroup } from './command.ts';
import { withDatabase } from './context.ts';

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

export const accountsCommands: CommandGroup = {
  name: 'accounts',
  summary: 'The accounts (tenants) in the database; they are created and changed by imports',
  subcommands: [list],
};
