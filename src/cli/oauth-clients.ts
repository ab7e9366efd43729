import { parseArgs } from 'node:util';
import { InputError } from '../errors.ts';
import {
  type OauthClientView,
  type OauthGrantView,
  oauthClientService,
} from '../services/oauth-client-service.ts';
import { type Command, type CommandGroup, positionals } from './command.ts';
import { listForAccount, withDatabase } from './context.ts';

// Audit events name the command line as the actor.
const ACTOR = 'cli';
const CLIENT_ID = 'oc_5d0c3f9e2b7a41c8a6e1f4d2b9c7e3a1';

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
    const { client, clientSecret } = await withDatabase(io, (db) =>
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
      (accountId) => withDatabase(io, (db) => oauthClientService.list(db, accountId), { tellServers: false }),
      describe,
    ),
};

const remove: Command = {
  name: 'oauth-clients delete',
  summary: 'Delete an OAuth client: its tokens stop working at their next use',
  usage: ['safety-api oauth-clients delete CLIENT_ID'],
  example: `safety-api oauth-clients delete ${CLIENT_ID}`,
  async run(args, io) {
    const [clientId] = positionals(args, 1, 'safety-api oauth-clients delete CLIENT_ID') as [string];
    await withDatabase(io, (db) => oauthClientService.delete(db, clientId));
    io.out(`Deleted OAuth client ${clientId}.`);
  },
};

const rotateSecret: Command = {
  name: 'oauth-clients rotate-secret',
  summary: "Replace a confidential client's secret; the old one keeps working for an overlap",
  usage: ['safety-api oauth-clients rotate-secret CLIENT_ID [--overlap now|1h|24h|7d] [--json]'],
  notes: [
    '--overlap  how long the old secret keeps working beside the new one: now, 1h, 24h (default) or 7d',
    '--json     { "client_id", "client_secret" (shown once), "previous_secret_expires_at" }',
  ],
  example: `safety-api oauth-clients rotate-secret ${CLIENT_ID} --overlap 24h --json`,
  async run(args, io) {
    const { values, positionals: ids } = parseArgs({
      args,
      allowPositionals: true,
      options: { overlap: { type: 'string', default: '24h' }, json: { type: 'boolean', default: false } },
    });
    const [clientId] = ids;
    if (clientId === undefined || ids.length !== 1) {
      throw new InputError(
        'usage: safety-api oauth-clients rotate-secret CLIENT_ID [--overlap now|1h|24h|7d] [--json]',
      );
    }
    const rotated = await withDatabase(io, (db) =>
      oauthClientService.rotateSecret(db, clientId, values.overlap, ACTOR),
    );
    if (values.json) {
      io.out(JSON.stringify(rotated));
    } else {
      io.out(`Client secret (shown once, store it now): ${rotated.client_secret}`);
      io.out(`The old secret works until ${rotated.previous_secret_expires_at}`);
    }
  },
};

function describeGrant(grant: OauthGrantView): string {
  return [
    grant.grant_id,
    grant.user_email ?? grant.user_id ?? '(unknown user)',
    grant.scopes.join(' '),
    `granted ${grant.granted_at ?? 'unknown'}`,
    `last used ${grant.last_used_at ?? 'never'}`,
  ].join('  ');
}

const grants: Command = {
  name: 'oauth-clients grants',
  summary: 'List the users who granted an OAuth client access: scopes, when, last token use',
  usage: ['safety-api oauth-clients grants CLIENT_ID [--json]'],
  notes: [
    '--json  an array of { "grant_id", "user_id", "user_name", "user_email", "scopes", "granted_at", "last_used_at" }',
  ],
  example: `safety-api oauth-clients grants ${CLIENT_ID} --json`,
  async run(args, io) {
    const { values, positionals: ids } = parseArgs({
      args,
      allowPositionals: true,
      options: { json: { type: 'boolean', default: false } },
    });
    const [clientId] = ids;
    if (clientId === undefined || ids.length !== 1) {
      throw new InputError('usage: safety-api oauth-clients grants CLIENT_ID [--json]');
    }
    const list = await withDatabase(io, (db) => oauthClientService.listGrants(db, clientId), {
      tellServers: false,
    });
    if (values.json) io.out(JSON.stringify(list));
    else if (list.length === 0) io.out('No grants.');
    else for (const grant of list) io.out(describeGrant(grant));
  },
};

const revokeGrant: Command = {
  name: 'oauth-clients revoke-grant',
  summary: "Revoke a user's grant of an OAuth client: its refresh and access tokens stop at once",
  usage: ['safety-api oauth-clients revoke-grant CLIENT_ID GRANT_ID'],
  example: `safety-api oauth-clients revoke-grant ${CLIENT_ID} 4Qm1n0l2yXbK8cJt7sVwZ`,
  async run(args, io) {
    const [clientId, grantId] = positionals(
      args,
      2,
      'safety-api oauth-clients revoke-grant CLIENT_ID GRANT_ID',
    ) as [string, string];
    await withDatabase(io, (db) => oauthClientService.revokeGrant(db, clientId, grantId, ACTOR));
    io.out(`Revoked grant ${grantId} of OAuth client ${clientId}.`);
  },
};

export const oauthClientsCommands: CommandGroup = {
  name: 'oauth-clients',
  summary: 'Manage the OAuth clients (partner apps) registered for an account',
  subcommands: [create, list, remove, rotateSecret, grants, revokeGrant],
};
