import { createHash, randomBytes } from 'node:crypto';
import type { paths } from './generated/openapi.ts';
import { type CallOptions, type ConnectionOptions, errorOf, Transport } from './transport.ts';
import type { JsonWebKeySet, OpenIdConfiguration, TokenSet, UserInfo } from './types.ts';

export interface OAuthClientOptions extends ConnectionOptions {
  /** The client's id, from `safety-api oauth-clients create` or the admin panel. */
  clientId: string;
  /**
   * A confidential client's secret, sent as HTTP Basic authentication. None for a public client (an
   * app that cannot keep a secret), which PKCE alone protects.
   */
  clientSecret?: string;
}

/** The parameters of an authorization request: what the person is asked to approve. */
export interface AuthorizationRequest {
  /** One of the client's registered redirect URIs, exactly. */
  redirectUri: string;
  /** Space-separated, e.g. `openid incidents:read`. */
  scope: string;
  /** Returned unchanged with the result; a random one unless given. */
  state?: string;
  /** Copied into the ID token. */
  nonce?: string;
  /** `none`, `login` or `consent`. */
  prompt?: string;
  /** The email address to sign in with. */
  loginHint?: string;
}

/**
 * Where to send the person's browser, and what to keep until it comes back: the PKCE verifier that
 * redeems the code, and the `state` the callback must carry (compare it before you redeem).
 */
export interface Authorization {
  url: string;
  codeVerifier: string;
  state: string;
}

/** The server's paths this client builds URLs for, checked against the OpenAPI document's. */
const AUTHORIZE = '/integration/v1/oauth2/authorize' satisfies keyof paths;
const END_SESSION = '/integration/v1/oauth2/session/end' satisfies keyof paths;

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

/** Random URL-safe text: 32 bytes, as RFC 7636 recommends for a verifier. */
const randomText = () => randomBytes(32).toString('base64url');

/** A value as `application/x-www-form-urlencoded` writes it, as RFC 6749 (2.3.1) asks of Basic credentials. */
const formEncoded = (value: string) => new URLSearchParams({ v: value }).toString().slice(2);

/** Form fields with the absent ones left out. */
function fields(values: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(values).filter((entry): entry is [string, string] => entry[1] !== undefined),
  );
}

/**
 * A client of the service's OAuth 2 authorization server, for a partner app registered with the
 * account: the authorization code flow with PKCE, client credentials, refresh, revocation, the
 * userinfo of a token, and sign-out. The tokens it gets are the `accessToken` of `createClient`.
 * A POST here is never retried: a code or refresh token it carried may already be spent.
 */
export class OAuthClient {
  readonly #transport: Transport;
  readonly #clientId: string;
  readonly #clientSecret: string | undefined;

  constructor(options: OAuthClientOptions) {
    const { clientId, clientSecret } = options;
    if (typeof clientId !== 'string' || clientId === '') throw new TypeError('clientId is required');
    this.#clientId = clientId;
    this.#clientSecret = clientSecret;
    this.#transport = new Transport(options);
  }

  /** The OpenID Connect discovery document: the server's endpoints, scopes and methods. */
  async getOpenIdConfiguration(options: CallOptions = {}): Promise<OpenIdConfiguration> {
    return this.#body(
      this.#transport.api.GET(
        '/integration/v1/oauth2/.well-known/openid-configuration',
        this.#transport.init(options),
      ),
    );
  }

  /** The public keys that sign ID tokens (a JSON Web Key Set). */
  async getJwks(options: CallOptions = {}): Promise<JsonWebKeySet> {
    return this.#body(this.#transport.api.GET('/integration/v1/oauth2/jwks', this.#transport.init(options)));
  }

  /**
   * The URL of `/authorize` to send the person's browser to, with a new PKCE pair (S256): the
   * browser comes back to `redirectUri` with `code` and `state` (or `error`). No request is made.
   */
  authorizationUrl(request: AuthorizationRequest): Authorization {
    const { parameters, codeVerifier, state } = this.#authorizationParameters(request);
    return { url: this.#url(AUTHORIZE, parameters), codeVerifier, state };
  }

  /**
   * The same request, its parameters sent to the server first (RFC 9126, authenticated): the URL
   * then carries only `client_id` and a `request_uri`, to use within `expiresIn` seconds.
   */
  async pushAuthorizationRequest(
    request: AuthorizationRequest,
    options: CallOptions = {},
  ): Promise<Authorization & { expiresIn: number }> {
    const { parameters, codeVerifier, state } = this.#authorizationParameters(request);
    const pushed = await this.#body(
      this.#transport.api.POST('/integration/v1/oauth2/request', {
        body: parameters,
        headers: { ...FORM, ...this.#authentication() },
        ...this.#transport.init(options, { retry: false }),
      }),
    );
    return {
      url: this.#url(AUTHORIZE, { client_id: this.#clientId, request_uri: pushed.request_uri }),
      codeVerifier,
      state,
      expiresIn: pushed.expires_in,
    };
  }

  /**
   * Tokens for the `code` the callback carried, with the `codeVerifier` of its `authorizationUrl` and
   * the same `redirectUri`. Check the callback's `state` first. A code is spent by its first use.
   */
  async exchangeCode(
    { code, codeVerifier, redirectUri }: { code: string; codeVerifier: string; redirectUri: string },
    options: CallOptions = {},
  ): Promise<TokenSet> {
    return this.#token(
      { grant_type: 'authorization_code', code, code_verifier: codeVerifier, redirect_uri: redirectUri },
      options,
    );
  }

  /**
   * Tokens for the client itself (a confidential client): the account-wide data scopes registered
   * for it, or the part of them `scope` names.
   */
  async clientCredentialsToken(
    { scope }: { scope?: string } = {},
    options: CallOptions = {},
  ): Promise<TokenSet> {
    return this.#token({ grant_type: 'client_credentials', scope }, options);
  }

  /**
   * New tokens for a refresh token (`/token/refresh`). It rotates: keep the new `refresh_token`,
   * since the one sent is spent, and using it again revokes the whole grant.
   */
  async refreshToken(
    refreshToken: string,
    { scope }: { scope?: string } = {},
    options: CallOptions = {},
  ): Promise<TokenSet> {
    return this.#body(
      this.#transport.api.POST('/integration/v1/oauth2/token/refresh', {
        body: this.#form({ refresh_token: refreshToken, scope }),
        headers: { ...FORM, ...this.#authentication() },
        ...this.#transport.init(options, { retry: false }),
      }),
    );
  }

  /**
   * Revokes an access or refresh token (RFC 7009): a refresh token ends its grant, and the grant's
   * access tokens with it. A token that is unknown or already revoked resolves the same.
   */
  async revokeToken(
    token: string,
    { tokenTypeHint }: { tokenTypeHint?: 'access_token' | 'refresh_token' } = {},
    options: CallOptions = {},
  ): Promise<void> {
    const { error, response } = await this.#transport.api.POST('/integration/v1/oauth2/revoke', {
      body: this.#form({ token, token_type_hint: tokenTypeHint }),
      headers: { ...FORM, ...this.#authentication() },
      ...this.#transport.init(options, { retry: false }),
    });
    if (!response.ok) throw errorOf(response, error);
  }

  /**
   * The claims of the person an access token acts for (OpenID Connect userinfo, a token of the
   * authorization code grant with `openid`): `sub`, and what `profile`, `email` and `employment`
   * release. Asked with GET, the token in the `Authorization` header.
   */
  async getUserInfo(accessToken: string, options: CallOptions = {}): Promise<UserInfo> {
    return this.#body(
      this.#transport.api.GET('/integration/v1/oauth2/userinfo', {
        headers: { authorization: `Bearer ${accessToken}` },
        ...this.#transport.init(options),
      }),
    );
  }

  /**
   * The URL that signs the person out of the service (OpenID Connect RP-initiated logout), for
   * their browser; then back to `postLogoutRedirectUri` if the client registered it. Tokens
   * already issued stay valid: revoke them. No request is made.
   */
  endSessionUrl(
    request: { idTokenHint?: string; postLogoutRedirectUri?: string; state?: string } = {},
  ): string {
    return this.#url(
      END_SESSION,
      fields({
        client_id: this.#clientId,
        id_token_hint: request.idTokenHint,
        post_logout_redirect_uri: request.postLogoutRedirectUri,
        state: request.state,
      }),
    );
  }

  #authorizationParameters({
    redirectUri,
    scope,
    state = randomText(),
    nonce,
    prompt,
    loginHint,
  }: AuthorizationRequest) {
    const codeVerifier = randomText();
    const parameters = {
      ...fields({ nonce, prompt, login_hint: loginHint }),
      response_type: 'code' as const,
      client_id: this.#clientId,
      redirect_uri: redirectUri,
      scope,
      state,
      code_challenge: createHash('sha256').update(codeVerifier).digest('base64url'),
      code_challenge_method: 'S256' as const,
    };
    return { parameters, codeVerifier, state };
  }

  #url(path: string, parameters: Record<string, string>): string {
    return `${this.#transport.origin}${path}?${new URLSearchParams(parameters)}`;
  }

  /** A confidential client's credentials: HTTP Basic; a public client names itself in the form. */
  #authentication(): { authorization?: string } {
    if (this.#clientSecret === undefined) return {};
    const credentials = `${formEncoded(this.#clientId)}:${formEncoded(this.#clientSecret)}`;
    return { authorization: `Basic ${Buffer.from(credentials).toString('base64')}` };
  }

  /** A form's fields, with `client_id` for a public client. */
  #form<T extends Record<string, string | undefined>>(values: T) {
    const clientId = this.#clientSecret === undefined ? { client_id: this.#clientId } : {};
    return { ...fields(values), ...clientId } as T & { client_id?: string };
  }

  async #token(
    values: { grant_type: 'authorization_code' | 'client_credentials' } & Record<string, string | undefined>,
    options: CallOptions,
  ): Promise<TokenSet> {
    return this.#body(
      this.#transport.api.POST('/integration/v1/oauth2/token', {
        body: this.#form(values),
        headers: { ...FORM, ...this.#authentication() },
        ...this.#transport.init(options, { retry: false }),
      }),
    );
  }

  async #body<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
    const { data, error, response } = await call;
    if (data === undefined) throw errorOf(response, error);
    return data;
  }
}

/** A client of the service's OAuth 2 authorization server, for one registered client. */
export function createOAuthClient(options: OAuthClientOptions): OAuthClient {
  return new OAuthClient(options);
}
