import { parseArgs } from 'node:util';
import { InputError } from '../errors.ts';
import { type ApiKeyView, apiKeyService } from '../services/api-key-service.ts';
import { type Io, listForAccount, withDatabase } from './context.ts';

export const KEYS_USAGE = `safety-api keys create --account ID --name NAME [--scope read|read-write|admin] [--expires-at ISO] [--json]
safety-api keys list --account ID [--json]
safety-api keys rename KEY_ID NAME
safety-api keys disable|enable|revoke KEY_ID
safety-api keys scope KEY_ID SCOPE`;

const ACTOR = 'cli';

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

function positionals(args: string[], count: number, usage: string): string[] {
  const { positionals: values } = parseArgs({ args, allowPositionals: true, options: {} });
  if (values.length !== count) throw new InputError(`usage: ${usage}`);
  return values;
}

export async function keysCommand(args: string[], io: Io): Promise<void> {
  const [action, ...rest] = args;
  switch (action) {
    case 'create': {
      const { values } = parseArgs({
        args: rest,
        options: {
          account: { type: 'string' },
          name: { type: 'string' },
          scope: { type: 'string' },
          'expires-at': { type: 'string' },
          json: { type: 'boolean', default: false },
        },
      });
      if (values.account === undefined || values.name === undefined) {
        throw new InputError('keys create needs --account ID and --name NAME');
      }
      const { key, rawKey } = await withDatabase((db) =>
        apiKeyService.create(db, {
          accountId: values.account as string,
          name: values.name as string,
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
      return;
    }
    case 'list':
      await listForAccount(
        rest,
        io,
        { command: 'keys', empty: 'No API keys.' },
        apiKeyService.list,
        describe,
      );
      return;
    case 'rename': {
      const [keyId, name] = positionals(rest, 2, 'safety-api keys rename KEY_ID NAME') as [string, string];
      io.out(describe(await withDatabase((db) => apiKeyService.rename(db, keyId, name, ACTOR))));
      return;
    }
    case 'scope': {
      const [keyId, scope] = positionals(rest, 2, 'safety-api keys scope KEY_ID SCOPE') as [string, string];
      io.out(describe(await withDatabase((db) => apiKeyService.setScope(db, keyId, scope, ACTOR))));
      return;
    }
    case 'disable':
    case 'enable':
    case 'revoke': {
      const [keyId] = positionals(rest, 1, `safety-api keys ${action} KEY_ID`) as [string];
      io.out(describe(await withDatabase((db) => apiKeyService[action](db, keyId, ACTOR))));
      return;
    }
    default:
      throw new InputError(
        `unknown keys action "${action ?? ''}": expected create, list, rename, disable, enable, revoke or scope`,
      );
  }
}
