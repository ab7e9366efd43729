import { parseArgs } from 'node:util';
import { InputError } from '../errors.ts';
import { type OauthClientView, oauthClientService } from '../services/oauth-client-service.ts';
import { type Command, type CommandGroup, positionals } from './command.ts';
import { listForAccount, withDatabase } from './context.ts';

function describe(client: OauthClientView): string {
  return [
    client.client_id,
    client.type,
    `"${client.name}"`,
    client.redirect_uris.join(' '),
    client.created_at,
  ].join('  ');
}

const create: Command = {
  name: 'oauth-clients create',
  summary:
    'Register a partner app (OAuth client) for an account; a confidential client gets a secret, shown once',
  usage: [
    'safety-api oauth-clients create --account ID --name NAME --redirect-uri URI [--redirect-uri URI…] [--public] [--json]',
  ],
  notes: [
    '--redirect-uri  https, or http to localhost/127.0.0.1; no fragment; repeat for several',
    '--public        a mobile or single-page app: no secret, PKCE only',
    '--json          one JSON object with client_id and (confidential clients) client_secret',
  ],
  example:
    'safety-api oauth-clients create --account 0b5e6c1a-8d2f-4c3e-9a7b-1f2e3d4c5b6a --name "Acme BI" --redirect-uri https://bi.acme.example/oauth/callback --json',
  async run(args, io) {
    const { values } = parseArgs({
      args,
      options: {
        account: { type: 'string' },
        name: { type: 'string' },
        'redirect-uri': { type: 'string', multiple: true },
        public: { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
      },
    });
    const { account, name } = values;
    const redirectUris = values['redirect-uri'];
    if (account === undefined || name === undefined || redirectUris === undefined) {
      throw new InputError('oauth-clients create needs --account ID, --name NAME and --redirect-uri URI');
    }
    const { client, clientSecret } = await withDatabase((db) =>
      oauthClientService.create(db, { accountId: account, name, redirectUris, isPublic: values.public }),
    );
    if (values.json) {
      io.out(JSON.stringify(clientSecret === null ? client : { ...client, client_secret: clientSecret }));
    } else {
      io.out(`Created ${describe(client)}`);
      if (clientSecret !== null) io.out(`Client secret (shown once, store it now): ${clientSecret}`);
    }
  },
};

const list: Command = {
  name: 'oauth-clients list',
  summary: "List an account's OAuth clients (never their secrets)",
  usage: ['safety-api oauth-clients list --account ID [--json]'],
  example: 'safety-api oauth-clients list --account 0b5e6c1a-8d2f-4c3e-9a7b-1f2e3d4c5b6a',
  run: (args, io) =>
    listForAccount(
      args,
      io,
      { command: 'oauth-clients', empty: 'No OAuth clients.' },
      oauthClientService.list,
      describe,
    ),
};

const remove: Command = {
  name: 'oauth-clients delete',
  summary: 'Delete an OAuth client: its tokens stop working at their next use',
  usage: ['safety-api oauth-clients delete CLIENT_ID'],
  example: 'safety-api oauth-clients delete oc_5d0c3f9e2b7a41c8a6e1f4d2b9c7e3a1',
  async run(args, io) {
    const [clientId] = positionals(args, 1, 'safety-api oauth-clients delete CLIENT_ID') as [string];
    await withDatabase((db) => oauthClientService.delete(db, clientId));
    io.out(`Deleted OAuth client ${clientId}.`);
  },
};

export const oauthClientsCommands: CommandGroup = {
  name: 'oauth-clients',
  summary: 'Manage the OAuth clients (partner apps) registered for an account',
  subcommands: [create, list, remove],
};
