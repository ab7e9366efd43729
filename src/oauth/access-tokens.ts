import type { Kysely } from 'kysely';
import type { Provider } from 'oidc-provider';
import { oauthClientRepository } from '../db/repositories/oauth-clients.ts';
import { oauthPayloadRepository } from '../db/repositories/oauth-payloads.ts';
import { isStoreUnavailable } from '../db/store-health.ts';
import { userRepository } from '../db/repositories/users.ts';
import type { Database } from '../db/schema.ts';
import { userMayUseAccount } from './accounts.ts';
import { ACCOUNT_DATA_APPROVER_ROLES, ACCOUNT_DATA_SCOPES } from './scopes.ts';

/**
 * The resource-server side: what an access token presented to the wider API stands for. Tokens
 * are opaque and looked up in the provider's store, so revocation, grant revocation (refresh-token
 * reuse), client deletion and user deactivation all take effect at the very next request. So does a
 * demotion: a user token reads account-wide data only while its user holds a role that may approve
 * that (the same rule as the consent page), else those scopes are dropped from it.
 */

export interface TokenPrincipal {
  /** The account whose data the token reads: its client's account. */
  accountId: string;
  clientId: string;
  /** The signed-in user, or `null` for a client-credentials token. */
  userId: string | null;
  scopes: Set<string>;
  /** The account's plan as it stands at this request (read with the client, no extra round trip). */
  apiAccess: boolean;
  rateLimitPerHour: number;
}

export type AccessTokenVerifier = (token: string) => Promise<TokenPrincipal | null>;

export function accessTokenVerifier(provider: Provider, db: Kysely<Database>): AccessTokenVerifier {
  return async (value) => {
    // Malformed values make the models throw; they are unknown tokens like any other. A store
    // that cannot answer says nothing about the token: that error goes on (503), or clients would
    // throw valid tokens away.
    const find = async () =>
      (await provider.AccessToken.find(value)) ?? (await provider.ClientCredentials.find(value));
    const token = await find().catch((error: unknown) => {
      if (isStoreUnavailable(error)) throw error;
      return undefined;
    });
    if (token === undefined || token.isExpired || token.clientId === undefined) return null;
    // A token issued from a grant that has since been revoked: the winner of a race between two
    // uses of one refresh token gets its tokens in the same instant as the loser's reuse revokes
    // the grant, and may save them just after the revocation deleted the grant's tokens.
    if (token.kind === 'AccessToken' && (await provider.Grant.find(token.grantId)) === undefined) return null;

    const client = await oauthClientRepository.findWithPlanById(db, token.clientId);
    if (client === undefined) return null;

    const userId = token.kind === 'AccessToken' ? (token.accountId ?? null) : null;
    const scopes = new Set((token.scope ?? '').split(' ').filter((s) => s !== ''));
    if (token.kind === 'AccessToken') {
      const user = userId === null ? undefined : await userRepository.findById(db, userId);
      if (user === undefined || !userMayUseAccount(user, client.account_id)) return null;
      if (!ACCOUNT_DATA_APPROVER_ROLES.includes(user.role)) {
        for (const scope of ACCOUNT_DATA_SCOPES) scopes.delete(scope);
      }
      // The grant's "last token use", shown to the Super Admin (oauth-client-service.ts).
      if (token.grantId !== undefined) await oauthPayloadRepository.touchGrant(db, token.grantId, new Date());
    }
    return {
      accountId: client.account_id,
      clientId: client.client_id,
      userId,
      scopes,
      apiAccess: client.api_access === 1,
      rateLimitPerHour: client.rate_limit_per_hour,
    };
  };
}
