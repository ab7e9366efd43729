import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Kysely } from 'kysely';
import { accountRepository } from '../db/repositories/accounts.ts';
import { type OauthClientRow, oauthClientRepository } from '../db/repositories/oauth-clients.ts';
import type { Database } from '../db/schema.ts';
import { InputError } from '../errors.ts';

/**
 * Registration of OAuth clients, shared by the CLI and the admin panel. A client belongs to one
 * account; its secret is 32 bytes from the CSPRNG, shown once, and stored only as a SHA-256 hash
 * (a fast hash is enough for a random 256-bit secret, as for API keys).
 */

export type OauthClientType = 'confidential' | 'public';

export interface OauthClientView {
  client_id: string;
  name: string;
  type: OauthClientType;
  redirect_uris: string[];
  created_at: string;
}

export interface NewOauthClient {
  accountId: string;
  name: string;
  redirectUris: string[];
  isPublic: boolean;
}

const MAX_NAME_LENGTH = 100;
const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

export function hashClientSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

export function clientSecretMatches(secret: string, secretHash: string): boolean {
  const given = Buffer.from(hashClientSecret(secret), 'hex');
  const stored = Buffer.from(secretHash, 'hex');
  return given.length === stored.length && timingSafeEqual(given, stored);
}

export function redirectUrisOf(row: OauthClientRow): string[] {
  return JSON.parse(row.redirect_uris) as string[];
}

export function toOauthClientView(row: OauthClientRow): OauthClientView {
  return {
    client_id: row.client_id,
    name: row.name,
    type: row.is_public === 1 ? 'public' : 'confidential',
    redirect_uris: redirectUrisOf(row),
    created_at: row.created_at,
  };
}

/** OAuth 2.0 Security BCP: https, or plain http only back to the same machine; never a fragment. */
function validRedirectUri(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new InputError(`redirect URI "${raw}" is not an absolute URL`);
  }
  const loopback = url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname);
  if (url.protocol !== 'https:' && !loopback) {
    throw new InputError(`redirect URI "${raw}" must use https (http only for localhost)`);
  }
  if (url.hash !== '' || raw.includes('#')) {
    throw new InputError(`redirect URI "${raw}" must not contain a fragment`);
  }
  return raw;
}

export const oauthClientService = {
  async create(
    db: Kysely<Database>,
    input: NewOauthClient,
  ): Promise<{ client: OauthClientView; clientSecret: string | null }> {
    const name = input.name.trim();
    if (name === '' || name.length > MAX_NAME_LENGTH) {
      throw new InputError(`the client name must be 1 to ${MAX_NAME_LENGTH} characters`);
    }
    if (input.redirectUris.length === 0) throw new InputError('at least one redirect URI is required');
    const redirectUris = [...new Set(input.redirectUris.map(validRedirectUri))];
    if ((await accountRepository.findById(db, input.accountId)) === undefined) {
      throw new InputError(`no account with id "${input.accountId}"`);
    }

    const clientSecret = input.isPublic ? null : `ocs_${randomBytes(32).toString('hex')}`;
    const row: OauthClientRow = {
      client_id: `oc_${randomBytes(16).toString('hex')}`,
      account_id: input.accountId,
      name,
      redirect_uris: JSON.stringify(redirectUris),
      is_public: input.isPublic ? 1 : 0,
      secret_hash: clientSecret === null ? null : hashClientSecret(clientSecret),
      created_at: new Date().toISOString(),
    };
    await oauthClientRepository.insert(db, row);
    return { client: toOauthClientView(row), clientSecret };
  },

  async list(db: Kysely<Database>, accountId: string): Promise<OauthClientView[]> {
    if ((await accountRepository.findById(db, accountId)) === undefined) {
      throw new InputError(`no account with id "${accountId}"`);
    }
    return (await oauthClientRepository.listByAccount(db, accountId)).map(toOauthClientView);
  },

  /** The client if it belongs to the account; another account's client is as absent as a missing one. */
  async findOwn(db: Kysely<Database>, clientId: string, accountId: string): Promise<OauthClientView | null> {
    const row = await oauthClientRepository.findById(db, clientId);
    return row === undefined || row.account_id !== accountId ? null : toOauthClientView(row);
  },

  /**
   * Deletes a client. Its tokens stop working at their next use: every token lookup requires the
   * client to exist. `accountId`, when given, restricts the deletion to that account's clients.
   */
  async delete(db: Kysely<Database>, clientId: string, accountId?: string): Promise<void> {
    const client = await oauthClientRepository.findById(db, clientId);
    if (client === undefined || (accountId !== undefined && client.account_id !== accountId)) {
      throw new InputError(`no OAuth client with id "${clientId}"`);
    }
    await oauthClientRepository.delete(db, clientId);
  },
};
