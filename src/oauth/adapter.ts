import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Adapter, AdapterFactory, AdapterPayload } from 'oidc-provider';
import { oauthClientRepository } from '../db/repositories/oauth-clients.ts';
import { oauthPayloadRepository } from '../db/repositories/oauth-payloads.ts';
import type { Database } from '../db/schema.ts';
import { previousSecretHashInForce, redirectUrisOf } from '../services/oauth-client-service.ts';
import { isStorableText } from '../lib/storable-text.ts';
import { ALL_SCOPES } from './scopes.ts';

/**
 * oidc-provider's persistence in the product's database. Clients come from `oauth_clients`
 * (registered by a Super Admin, never through dynamic registration); every other model is a JSON
 * payload in `oauth_payloads`, looked up by id, uid or user code.
 */

const CONFIDENTIAL_GRANTS = ['authorization_code', 'refresh_token', 'client_credentials'];
// A public client cannot keep a secret, so it cannot authenticate a client-credentials request.
const PUBLIC_GRANTS = ['authorization_code', 'refresh_token'];

/** Client metadata holding the hash of the secret a rotation replaced, while its overlap lasts. */
export const PREVIOUS_SECRET_METADATA = 'previous_client_secret';

const isoFromNow = (seconds: number): string => new Date(Date.now() + seconds * 1000).toISOString();
const epochSeconds = (iso: string): number => Math.floor(Date.parse(iso) / 1000);

// The provider's routes that hand a client a code or a token (`token` serves every grant).
const ISSUING_ROUTES = new Set(['authorization', 'resume', 'pushed_authorization_request', 'token']);

/**
 * A client whose account's plan lacks API access gets no new codes or tokens (DESIGN "Wider API").
 * The provider loads the client at the start of every request it serves, before reading or
 * consuming any code or refresh token, so refusing here leaves them intact: the client works again
 * as soon as the plan allows. Revocation, userinfo and discovery still load the client as usual.
 */
async function refuseIfIssuing(): Promise<void> {
  // Already loaded by whoever is serving this request; imported here, not at module load, as in provider.ts.
  const { Provider, errors } = await import('oidc-provider');
  const route = Provider.ctx?.oidc?.route;
  if (route !== undefined && ISSUING_ROUTES.has(route)) {
    throw new errors.UnauthorizedClient("the plan of this app's account does not include API access");
  }
}

class ClientAdapter implements Adapter {
  private readonly db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.db = db;
  }

  async find(clientId: string): Promise<AdapterPayload | undefined> {
    // A client id from a request that no client can have is unknown, as any other (invalid_client).
    if (!isStorableText(clientId)) return undefined;
    // The plan is read with the client: the check costs no extra round trip.
    const row = await oauthClientRepository.findWithPlanById(this.db, clientId);
    if (row === undefined) return undefined;
    if (row.api_access !== 1) await refuseIfIssuing();
    const isPublic = row.is_public === 1;
    // Read at every request (the provider keeps no client cache), so the old secret stops at the
    // end of its overlap on every instance.
    const previousSecretHash = previousSecretHashInForce(row, new Date());
    return {
      client_id: row.client_id,
      client_name: row.name,
      // The SHA-256 of the secret: `compareClientSecret` (provider.ts) hashes what the client sends.
      ...(isPublic ? {} : { client_secret: row.secret_hash as string }),
      ...(previousSecretHash === null ? {} : { [PREVIOUS_SECRET_METADATA]: previousSecretHash }),
      token_endpoint_auth_method: isPublic ? 'none' : 'client_secret_basic',
      redirect_uris: redirectUrisOf(row),
      grant_types: isPublic ? PUBLIC_GRANTS : CONFIDENTIAL_GRANTS,
      response_types: ['code'],
      scope: ALL_SCOPES.join(' '),
      account_id: row.account_id,
    };
  }

  async upsert(): Promise<void> {
    throw new Error('OAuth clients are registered through the CLI or the admin panel');
  }

  async destroy(): Promise<void> {
    throw new Error('OAuth clients are deleted through the CLI or the admin panel');
  }

  async findByUid(): Promise<undefined> {
    return undefined;
  }

  async findByUserCode(): Promise<undefined> {
    return undefined;
  }

  async consume(): Promise<void> {}

  async revokeByGrantId(): Promise<void> {}
}

/**
 * Models whose id is itself the credential a client or browser presents (tokens, codes, the
 * provider session cookie): stored under the SHA-256 of the id, without the id in the payload, so
 * a copy of the table opens nothing. Lookups hash what they are given.
 */
const BEARER_MODELS = new Set([
  'AccessToken',
  'RefreshToken',
  'AuthorizationCode',
  'ClientCredentials',
  'Session',
]);
const sha256 = (value: string): string => createHash('sha256').update(value).digest('hex');

class PayloadAdapter implements Adapter {
  private readonly bearer: boolean;

  private readonly db: Kysely<Database>;
  private readonly model: string;

  constructor(db: Kysely<Database>, model: string) {
    this.db = db;
    this.model = model;
    this.bearer = BEARER_MODELS.has(model);
  }

  private storedId(id: string): string {
    return this.bearer ? sha256(id) : id;
  }

  async upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
    const stored: AdapterPayload = { ...payload };
    if (this.bearer) delete stored.jti;
    // An interaction copies its session's id (the session cookie) into `session.cookie`; nothing
    // reads it back, so it is not kept.
    if (stored.session !== undefined) {
      const { cookie: _cookie, ...session } = stored.session;
      stored.session = session;
    }
    await oauthPayloadRepository.upsert(this.db, {
      model: this.model,
      id: this.storedId(id),
      payload: JSON.stringify(stored),
      grant_id: payload.grantId ?? null,
      user_code: payload.userCode ?? null,
      uid: payload.uid ?? null,
      user_id: payload.accountId ?? payload.session?.accountId ?? null,
      client_id: payload.clientId ?? null,
      expires_at: expiresIn === undefined ? null : isoFromNow(expiresIn),
    });
    // A new access token (sign-in or refresh) is a use of its grant, as is presenting one (access-tokens.ts).
    if (this.model === 'AccessToken' && payload.grantId !== undefined) {
      await oauthPayloadRepository.touchGrant(this.db, payload.grantId, new Date());
    }
  }

  async find(id: string): Promise<AdapterPayload | undefined> {
    const payload = await this.findBy('id', this.storedId(id));
    // The provider needs the id back on the model; it is the value it was just given.
    return payload === undefined || !this.bearer ? payload : { ...payload, jti: id };
  }

  findByUid(uid: string): Promise<AdapterPayload | undefined> {
    return this.findBy('uid', uid);
  }

  findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
    return this.findBy('user_code', userCode);
  }

  /**
   * Only the first use of a code or refresh token consumes it. oidc-provider reads `consumed`,
   * then consumes: two concurrent uses both read "not consumed", so the loser is found here, by the
   * conditional update, and treated as the reuse it is: the grant is revoked, and invalid_grant.
   */
  async consume(id: string): Promise<void> {
    const storedId = this.storedId(id);
    if (await oauthPayloadRepository.consume(this.db, this.model, storedId, new Date().toISOString())) return;
    const grantId = await oauthPayloadRepository.grantIdOf(this.db, this.model, storedId);
    if (grantId !== null) await oauthPayloadRepository.revokeGrant(this.db, grantId);
    const { errors } = await import('oidc-provider');
    throw new errors.InvalidGrant(
      `${this.model === 'RefreshToken' ? 'refresh token' : 'grant'} already used`,
    );
  }

  async destroy(id: string): Promise<void> {
    await oauthPayloadRepository.delete(this.db, this.model, this.storedId(id));
  }

  async revokeByGrantId(grantId: string): Promise<void> {
    await oauthPayloadRepository.deleteByGrantId(this.db, grantId);
  }

  private async findBy(
    column: 'id' | 'uid' | 'user_code',
    value: string,
  ): Promise<AdapterPayload | undefined> {
    // A value from a request (a `request_uri`, say) that nothing stored can have is unknown.
    if (!isStorableText(value)) return undefined;
    const row = await oauthPayloadRepository.findUnexpired(
      this.db,
      this.model,
      column,
      value,
      new Date().toISOString(),
    );
    if (row === undefined) return undefined;
    const payload = JSON.parse(row.payload) as AdapterPayload;
    // A consumed refresh token presented again is how the provider detects reuse.
    return row.consumed_at === null ? payload : { ...payload, consumed: epochSeconds(row.consumed_at) };
  }
}

export function kyselyAdapter(db: Kysely<Database>): AdapterFactory {
  return (model) => (model === 'Client' ? new ClientAdapter(db) : new PayloadAdapter(db, model));
}
