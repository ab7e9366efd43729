import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Kysely } from 'kysely';
import { accountRepository } from '../db/repositories/accounts.ts';
import { type OauthClientRow, oauthClientRepository } from '../db/repositories/oauth-clients.ts';
import { auditRepository } from '../db/repositories/audit-events.ts';
import { type ClientGrantRow, oauthPayloadRepository } from '../db/repositories/oauth-payloads.ts';
import type { Database } from '../db/schema.ts';
import { InputError } from '../errors.ts';
import { type Actor, parseOverlap, ROLL_OVERLAPS } from './api-key-service.ts';
import { isStorableText } from '../lib/storable-text.ts';
import { storableText } from './input-text.ts';

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

/** A user's approval of a client, as the panel and `oauth-clients grants --json` show it. */
export interface OauthGrantView {
  grant_id: string;
  user_id: string | null;
  user_name: string | null;
  user_email: string | null;
  scopes: string[];
  granted_at: string | null;
  last_used_at: string | null;
}

export interface RotatedSecret {
  client_id: string;
  client_secret: string;
  /** When the replaced secret stops working: now for an overlap of `now`. */
  previous_secret_expires_at: string;
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

/** The previous secret's hash while its overlap lasts at `now`, else null. */
export function previousSecretHashInForce(row: OauthClientRow, now: Date): string | null {
  const expiresAt = row.previous_secret_expires_at;
  if (row.previous_secret_hash === null || expiresAt === null) return null;
  return Date.parse(expiresAt) > now.getTime() ? row.previous_secret_hash : null;
}

const newClientSecret = (): string => `ocs_${randomBytes(32).toString('hex')}`;

/** The parts of a stored Grant payload the lists show (oidc-provider's Grant model). */
interface GrantPayload {
  iat?: number;
  openid?: { scope?: string };
}

/** What a stored Grant payload says: the scopes granted and when (`accounts export` shows them too). */
export function grantOf(payloadText: string): Pick<OauthGrantView, 'scopes' | 'granted_at'> {
  const payload = JSON.parse(payloadText) as GrantPayload;
  return {
    scopes: (payload.openid?.scope ?? '').split(' ').filter((scope) => scope !== ''),
    granted_at: payload.iat === undefined ? null : new Date(payload.iat * 1000).toISOString(),
  };
}

function toGrantView(row: ClientGrantRow): OauthGrantView {
  return {
    grant_id: row.grant_id,
    user_id: row.user_id,
    user_name: row.user_name,
    user_email: row.user_email,
    ...grantOf(row.payload),
    last_used_at: row.last_used_at,
  };
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
    const name = storableText('the client name', input.name.trim());
    if (name === '' || name.length > MAX_NAME_LENGTH) {
      throw new InputError(`the client name must be 1 to ${MAX_NAME_LENGTH} characters`);
    }
    if (input.redirectUris.length === 0) throw new InputError('at least one redirect URI is required');
    const redirectUris = [...new Set(input.redirectUris.map(validRedirectUri))];
    if ((await accountRepository.findById(db, input.accountId)) === undefined) {
      throw new InputError(`no account with id "${input.accountId}"`);
    }

    const clientSecret = input.isPublic ? null : newClientSecret();
    const row: OauthClientRow = {
      client_id: `oc_${randomBytes(16).toString('hex')}`,
      account_id: input.accountId,
      name,
      redirect_uris: JSON.stringify(redirectUris),
      is_public: input.isPublic ? 1 : 0,
      secret_hash: clientSecret === null ? null : hashClientSecret(clientSecret),
      created_at: new Date().toISOString(),
      previous_secret_hash: null,
      previous_secret_expires_at: null,
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
    const row = await findClient(db, clientId);
    return row === undefined || row.account_id !== accountId ? null : toOauthClientView(row);
  },

  /**
   * Deletes a client. Its tokens stop working at their next use: every token lookup requires the
   * client to exist. `accountId`, when given, restricts the deletion to that account's clients.
   */
  async delete(db: Kysely<Database>, clientId: string, accountId?: string): Promise<void> {
    await ownClient(db, clientId, accountId);
    await oauthClientRepository.delete(db, clientId);
  },

  /**
   * A new secret for a confidential client, returned to be shown once. The replaced secret keeps
   * working for `overlapValue` (now, 1h, 24h, 7d), as a rolled API key does, so the app can be
   * redeployed without an outage. A secret replaced earlier and still in its overlap stops now:
   * only one old secret is ever valid.
   */
  async rotateSecret(
    db: Kysely<Database>,
    clientId: string,
    overlapValue: string,
    actor: Actor,
    accountId?: string,
  ): Promise<RotatedSecret> {
    const overlap = parseOverlap(overlapValue);
    const client = await ownClient(db, clientId, accountId);
    if (client.secret_hash === null) {
      throw new InputError(`OAuth client "${clientId}" is public: it has no secret to rotate`);
    }
    const now = new Date();
    const previousExpiresAt = new Date(now.getTime() + ROLL_OVERLAPS[overlap]).toISOString();
    const clientSecret = newClientSecret();
    const secretHash = client.secret_hash;
    await db.transaction().execute(async (trx) => {
      const rotated = await oauthClientRepository.rotateSecret(trx, clientId, {
        secretHash: hashClientSecret(clientSecret),
        previousSecretHash: secretHash,
        keepPrevious: overlap !== 'now',
        previousExpiresAt,
      });
      // Two rotations at once: the secret the other one showed must not be silently lost.
      if (!rotated) throw new InputError('the secret was rotated by someone else just now');
      await auditRepository.insert(trx, {
        account_id: client.account_id,
        subject_type: 'oauth_client',
        subject_id: clientId,
        actor,
        action: 'secret_rotated',
        detail: `previous secret valid until ${previousExpiresAt}`,
        created_at: now.toISOString(),
      });
    });
    return {
      client_id: clientId,
      client_secret: clientSecret,
      previous_secret_expires_at: previousExpiresAt,
    };
  },

  /** The users who approved the client and whose grant is still in force. */
  async listGrants(db: Kysely<Database>, clientId: string, accountId?: string): Promise<OauthGrantView[]> {
    await ownClient(db, clientId, accountId);
    const rows = await oauthPayloadRepository.listGrantsOfClient(db, clientId, new Date().toISOString());
    return rows.map(toGrantView);
  },

  /**
   * Ends a grant: its refresh and access tokens and codes are deleted with it, and every token
   * lookup reads the database (no instance keeps a copy), so they fail at their next use anywhere.
   */
  async revokeGrant(
    db: Kysely<Database>,
    clientId: string,
    grantId: string,
    actor: Actor,
    accountId?: string,
  ): Promise<void> {
    const client = await ownClient(db, clientId, accountId);
    const grantFound =
      isStorableText(grantId) && (await oauthPayloadRepository.grantBelongsToClient(db, grantId, clientId));
    if (!grantFound) {
      throw new InputError(`OAuth client "${clientId}" has no grant with id "${grantId}"`);
    }
    await db.transaction().execute(async (trx) => {
      await oauthPayloadRepository.revokeGrant(trx, grantId);
      await auditRepository.insert(trx, {
        account_id: client.account_id,
        subject_type: 'oauth_client',
        subject_id: clientId,
        actor,
        action: 'grant_revoked',
        detail: `grant ${grantId}`,
        created_at: new Date().toISOString(),
      });
    });
  },
};

/** The client with this id; an id no client can have (`isStorableText`) is looked up in no store. */
async function findClient(db: Kysely<Database>, clientId: string): Promise<OauthClientRow | undefined> {
  return isStorableText(clientId) ? oauthClientRepository.findById(db, clientId) : undefined;
}

/** The client, if it exists and (when `accountId` is given) belongs to that account. */
async function ownClient(
  db: Kysely<Database>,
  clientId: string,
  accountId?: string,
): Promise<OauthClientRow> {
  const client = await findClient(db, clientId);
  if (client === undefined || (accountId !== undefined && client.account_id !== accountId)) {
    throw new InputError(`no OAuth client with id "${clientId}"`);
  }
  return client;
}
