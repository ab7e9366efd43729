import type { Kysely } from 'kysely';
import type { Configuration, Provider } from 'oidc-provider';
import type { Database } from '../db/schema.ts';
import { OAUTH_PATH } from '../paths.ts';
import { findAccount } from './accounts.ts';
import { kyselyAdapter, PREVIOUS_SECRET_METADATA } from './adapter.ts';
import { clientSecretMatches } from '../services/oauth-client-service.ts';
import type { OauthKeys } from './keys.ts';
import { API_SCOPES, CLAIMS_BY_SCOPE } from './scopes.ts';
import { messagePage, PAGE_SECURITY_HEADERS } from './views.ts';

const MINUTE = 60;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/**
 * The provider's endpoints under OAUTH_PATH: the spec's paths, not oidc-provider's defaults
 * (/auth, /token/revocation, /me). The OpenAPI document lists them (./endpoints.ts).
 */
export const PROVIDER_ROUTES = {
  authorization: '/authorize',
  token: '/token',
  revocation: '/revoke',
  userinfo: '/userinfo',
  jwks: '/jwks',
  end_session: '/session/end',
  pushed_authorization_request: '/request',
};

/** `/token` with `grant_type=refresh_token` implied (plugin.ts). */
export const REFRESH_ROUTE = `${PROVIDER_ROUTES.token}/refresh`;

function configuration(db: Kysely<Database>, keys: OauthKeys): Configuration {
  return {
    adapter: kyselyAdapter(db),
    findAccount: findAccount(db),
    jwks: keys.jwks,
    cookies: {
      keys: keys.cookieKeys,
      names: {
        session: 'safety_oauth_session',
        interaction: 'safety_oauth_interaction',
        resume: 'safety_oauth_resume',
      },
    },
    claims: Object.fromEntries(
      Object.entries(CLAIMS_BY_SCOPE).map(([scope, claims]) => [scope, [...claims]]),
    ),
    scopes: API_SCOPES,
    responseTypes: ['code'],
    pkce: { required: () => true },
    clientAuthMethods: ['client_secret_basic', 'client_secret_post', 'none'],
    extraClientMetadata: { properties: ['account_id', PREVIOUS_SECRET_METADATA] },
    routes: PROVIDER_ROUTES,
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      // A client revokes only its own tokens; another client's token is silently ignored (RFC 7009 §2.2).
      revocation: {
        enabled: true,
        allowedPolicy: async (_ctx, client, token) => token.clientId === client.clientId,
      },
      userinfo: { enabled: true },
      // Access tokens are opaque and read by the wider API in this same service (see access-tokens.ts).
      resourceIndicators: { enabled: false },
      // The wider API takes `Authorization: Bearer` tokens only: a DPoP-bound token (RFC 9449),
      // which the provider would issue to a client sending a proof, could never be used there.
      dPoP: { enabled: false },
    },
    interactions: { url: (_ctx, interaction) => `${OAUTH_PATH}/interaction/${interaction.uid}` },
    // Integrations run unattended: every client allowed the refresh grant gets a refresh token,
    // without `offline_access`, and it outlives the browser session that granted it.
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    expiresWithSession: async () => false,
    rotateRefreshToken: true,
    ttl: {
      AccessToken: HOUR,
      ClientCredentials: HOUR,
      AuthorizationCode: MINUTE,
      IdToken: HOUR,
      Interaction: HOUR,
      RefreshToken: 30 * DAY,
      Session: DAY,
      Grant: 365 * DAY,
    },
    renderError: (ctx, out) => {
      ctx.set(PAGE_SECURITY_HEADERS);
      ctx.type = 'html';
      ctx.body = messagePage('The app could not connect', out.error_description ?? out.error);
    },
  };
}

/**
 * Builds the authorization server. oidc-provider is imported here, not at module load, so that
 * CLI commands which never serve HTTP do not load it (it warns on stderr about Node.js 20).
 */
export async function createOauthProvider(
  baseUrl: string,
  db: Kysely<Database>,
  keys: OauthKeys,
): Promise<Provider> {
  const { default: OidcProvider } = await import('oidc-provider');
  const provider = new OidcProvider(`${baseUrl}${OAUTH_PATH}`, configuration(db, keys));
  // The mount (plugin.ts) sets X-Forwarded-Proto/Host from BASE_URL, so every URL the provider
  // builds uses the configured public origin whatever the Host header or TLS termination.
  provider.proxy = true;
  // Stored client secrets are SHA-256 hashes (adapter.ts): compare the hash of what was sent.
  // During a rotation's overlap the previous secret (adapter.ts) is accepted too.
  provider.Client.prototype.compareClientSecret = function compareClientSecret(actual: string) {
    const previous: unknown = this.metadata()[PREVIOUS_SECRET_METADATA];
    return (
      (typeof this.clientSecret === 'string' && clientSecretMatches(actual, this.clientSecret)) ||
      (typeof previous === 'string' && clientSecretMatches(actual, previous))
    );
  };
  return provider;
}
