import { parseArgs } from 'node:util';
import { InputError } from '../errors.ts';
import { type OauthClientView, oauthClientService } from '../oauth/clients.ts';
import { type Io, listForAccount, withDatabase } from './context.ts';

export const OAUTH_CLIENTS_USAGE = `safety-api oauth-clients create --account ID --name NAME --redirect-uri URI [--redirect-uri URI…] [--public] [--json]
safety-api oauth-clients list --account ID [--json]
safety-api oauth-clients delete CLIENT_ID`;

function describe(client: OauthClientView): string {
  return [
    client.client_id,
    client.type,
    `"${client.name}"`,
    client.redirect_uris.join(' '),
    client.created_at,
  ].join('  ');
}

export async function oauthClientsCommand(args: string[], io: Io): Promise<void> {
  const [action, ...rest] = args;
  switch (action) {
    case 'create': {
      const { values } = parseArgs({
        args: rest,
        options: {
          account: { type: 'string' },
          name: { type: 'string' },
          'redirect-uri': { type: 'string', multiple: true },
          public: { type: 'boolean', default: false },
          json: { type: 'boolean', default: false },
        },
      });
      if (values.account === undefined || values.name === undefined || values['redirect-uri'] === undefined) {
        throw new InputError('oauth-clients create needs --account ID, --name NAME and --redirect-uri URI');
      }
      const { client, clientSecret } = await withDatabase((db) =>
        oauthClientService.create(db, {
          accountId: values.account as string,
          name: values.name as string,
          redirectUris: values['redirect-uri'] as string[],
          isPublic: values.public === true,
        }),
      );
      if (values.json) {
        io.out(JSON.stringify(clientSecret === null ? client : { ...client, client_secret: clientSecret }));
      } else {
        io.out(`Created ${describe(client)}`);
        if (clientSecret !== null) io.out(`Client secret (shown once, store it now): ${clientSecret}`);
      }
      return;
    }
    case 'list':
      await listForAccount(
        rest,
        io,
        { command: 'oauth-clients', empty: 'No OAuth clients.' },
        oauthClientService.list,
        describe,
      );
      return;
    case 'delete': {
      const { positionals } = parseArgs({ args: rest, allowPositionals: true, options: {} });
      if (positionals.length !== 1) throw new InputError('usage: safety-api oauth-clients delete CLIENT_ID');
      const clientId = positionals[0] as string;
      await withDatabase((db) => oauthClientService.delete(db, clientId));
      io.out(`Deleted OAuth client ${clientId}.`);
      return;
    }
    default:
      throw new InputError(`unknown oauth-clients action "${action ?? ''}": expected create, list or delete`);
  }
}
