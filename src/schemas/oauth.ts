import { Type } from 'typebox';
import { component } from './openapi.ts';

/**
 * What the OAuth 2 authorization server (oidc-provider, src/oauth/) takes and answers, as the
 * OpenAPI document describes it: RFC 6749 and 7009, OpenID Connect Core and Discovery, RFC 9126
 * (pushed authorization requests). Nothing serializes through these: the provider writes its own
 * bodies, and the tests check them against the document.
 */

const ISSUER = 'https://safety.example.com/integration/v1/oauth2';

/** A page for people, the answer of the endpoints a browser visits (`/authorize`, `/session/end`). */
export const PAGE_CONTENT = { 'text/html': { schema: Type.String(), example: '<!doctype html>…' } };

/** Every error of the provider's JSON endpoints (RFC 6749 §5.2). */
export const OAuthErrorSchema = component(
  'OAuthError',
  Type.Object({
    error: Type.String({
      description:
        'The OAuth error code: `invalid_request`, `invalid_client`, `invalid_grant`, `unauthorized_client`, `unsupported_grant_type`, `invalid_scope`, `invalid_token`, `insufficient_scope`, `server_error`…',
    }),
    error_description: Type.Optional(Type.String({ description: 'A sentence for people' })),
  }),
);

export const TOKEN_EXAMPLE = {
  access_token: 'Jx0bYgK1Qm3tV8cR5nP2wL7eH4sD9aF6uZ0yT1iO3kB',
  expires_in: 3600,
  token_type: 'Bearer',
  scope: 'openid users:read incidents:read',
  refresh_token: 'rT8nW2kxv1QoJ3pY9bF0aHcT5uE8rLmD4sK6gN1iVxA',
};

export const TokenResponseSchema = component(
  'TokenResponse',
  Type.Object(
    {
      access_token: Type.String({
        description: 'Send it as `Authorization: Bearer <token>` to the wider API',
      }),
      token_type: Type.Literal('Bearer'),
      expires_in: Type.Integer({ description: 'Seconds the access token is valid (an hour)' }),
      scope: Type.Optional(Type.String({ description: 'The granted scopes, space-separated' })),
      refresh_token: Type.Optional(
        Type.String({
          description:
            'With the authorization code and refresh grants, for a client allowed to refresh: a new one each time (the one used is spent; using it again revokes the whole grant)',
        }),
      ),
      id_token: Type.Optional(Type.String({ description: 'With the `openid` scope: a signed JWT (RS256)' })),
    },
    { examples: [TOKEN_EXAMPLE] },
  ),
);

const clientId = Type.String({ description: 'The client id (client_secret_post, or a public client)' });
const clientSecret = Type.String({ description: "A confidential client's secret (client_secret_post)" });
const scope = Type.String({
  description:
    'Space-separated: `openid`, `profile`, `email`, `employment` (userinfo claims) and the wider API scopes (`users:read`, `departments:read`, `locations:read`, `incidents:read`)',
});

export const TokenRequestSchema = component(
  'TokenRequest',
  Type.Object({
    grant_type: Type.Union([
      Type.Literal('authorization_code'),
      Type.Literal('refresh_token'),
      Type.Literal('client_credentials'),
    ]),
    code: Type.Optional(Type.String({ description: 'authorization_code: the code the redirect carried' })),
    redirect_uri: Type.Optional(
      Type.String({ format: 'uri', description: 'authorization_code: as in the authorization request' }),
    ),
    code_verifier: Type.Optional(Type.String({ description: 'authorization_code: the PKCE verifier' })),
    refresh_token: Type.Optional(Type.String({ description: 'refresh_token: the latest refresh token' })),
    scope: Type.Optional(scope),
    client_id: Type.Optional(clientId),
    client_secret: Type.Optional(clientSecret),
  }),
);

export const RefreshRequestSchema = component(
  'RefreshRequest',
  Type.Object({
    refresh_token: Type.String({ description: 'The latest refresh token' }),
    grant_type: Type.Optional(Type.Literal('refresh_token', { description: 'Implied; may be sent' })),
    scope: Type.Optional(scope),
    client_id: Type.Optional(clientId),
    client_secret: Type.Optional(clientSecret),
  }),
);

export const RevocationRequestSchema = component(
  'RevocationRequest',
  Type.Object({
    token: Type.String({ description: "An access or refresh token of this client's" }),
    token_type_hint: Type.Optional(Type.Union([Type.Literal('access_token'), Type.Literal('refresh_token')])),
    client_id: Type.Optional(clientId),
    client_secret: Type.Optional(clientSecret),
  }),
);

/**
 * The parameters of an authorization request, in the query of `/authorize` or the form of a
 * pushed request. PKCE is required of every client.
 */
const authorizationParameters = {
  response_type: Type.Literal('code'),
  client_id: Type.String(),
  redirect_uri: Type.String({
    format: 'uri',
    description: 'One of the redirect URIs registered for the client',
  }),
  scope,
  state: Type.Optional(Type.String({ description: 'Returned unchanged with the result' })),
  code_challenge: Type.String({ description: 'BASE64URL(SHA-256(code_verifier))' }),
  code_challenge_method: Type.Literal('S256'),
  nonce: Type.Optional(Type.String({ description: 'Copied into the ID token' })),
  response_mode: Type.Optional(
    Type.Union([Type.Literal('query'), Type.Literal('fragment'), Type.Literal('form_post')], {
      description: 'How the result reaches `redirect_uri`; `query` by default',
    }),
  ),
  prompt: Type.Optional(Type.String({ description: '`none`, `login` or `consent`' })),
  login_hint: Type.Optional(Type.String({ description: 'The email address to sign in with' })),
};

/** In the query of `/authorize`: the parameters themselves, or the `request_uri` of a pushed request. */
export const AuthorizationQuerySchema = Type.Object({
  ...authorizationParameters,
  // Optional here, each of these: a pushed request (`request_uri`) already holds them.
  response_type: Type.Optional(authorizationParameters.response_type),
  redirect_uri: Type.Optional(authorizationParameters.redirect_uri),
  scope: Type.Optional(authorizationParameters.scope),
  code_challenge: Type.Optional(authorizationParameters.code_challenge),
  code_challenge_method: Type.Optional(authorizationParameters.code_challenge_method),
  request_uri: Type.Optional(
    Type.String({
      description: 'The `request_uri` of a pushed authorization request, instead of the other parameters',
    }),
  ),
});

export const PushedAuthorizationRequestSchema = component(
  'PushedAuthorizationRequest',
  Type.Object({
    ...authorizationParameters,
    client_secret: Type.Optional(clientSecret),
  }),
);

export const PushedAuthorizationResponseSchema = component(
  'PushedAuthorizationResponse',
  Type.Object({
    request_uri: Type.String({
      description: 'Send it to `/authorize` with `client_id`, within `expires_in`',
    }),
    expires_in: Type.Integer({ description: 'Seconds' }),
  }),
);

export const EndSessionQuerySchema = Type.Object({
  id_token_hint: Type.Optional(Type.String({ description: 'An ID token this server issued to the client' })),
  post_logout_redirect_uri: Type.Optional(
    Type.String({ format: 'uri', description: 'Where to return after signing out' }),
  ),
  state: Type.Optional(Type.String({ description: 'Returned unchanged to `post_logout_redirect_uri`' })),
  client_id: Type.Optional(Type.String()),
  logout_hint: Type.Optional(Type.String()),
});

export const USER_INFO_EXAMPLE = {
  sub: '8d2e4f60-1a3b-4c5d-9e7f-0a1b2c3d4e5f',
  name: 'Amara Okafor',
  email: 'amara.okafor@example.com',
  role: 'manager',
  department: 'Operations',
  job_title: 'Shift Supervisor',
};

/** The signed-in user's claims, as far as the granted scopes release them (src/oauth/scopes.ts). */
export const UserInfoSchema = component(
  'UserInfo',
  Type.Object(
    {
      sub: Type.String({ description: "The user's id" }),
      name: Type.Optional(Type.String({ description: 'With `profile`' })),
      email: Type.Optional(Type.String({ format: 'email', description: 'With `email`' })),
      role: Type.Optional(Type.String({ description: 'With `employment`' })),
      department: Type.Optional(
        Type.Union([Type.String(), Type.Null()], { description: 'With `employment`' }),
      ),
      job_title: Type.Optional(
        Type.Union([Type.String(), Type.Null()], { description: 'With `employment`' }),
      ),
    },
    { examples: [USER_INFO_EXAMPLE] },
  ),
);

export const UserInfoRequestSchema = component(
  'UserInfoRequest',
  Type.Object({
    access_token: Type.Optional(
      Type.String({ description: 'The access token, when it is not in the `Authorization` header' }),
    ),
  }),
);

export const JsonWebKeySetSchema = component(
  'JsonWebKeySet',
  Type.Object({
    keys: Type.Array(
      Type.Object({
        kty: Type.String(),
        use: Type.Optional(Type.String()),
        kid: Type.Optional(Type.String()),
        alg: Type.Optional(Type.String()),
        n: Type.Optional(Type.String()),
        e: Type.Optional(Type.String()),
      }),
      { description: 'The public keys that sign ID tokens' },
    ),
  }),
);

export const JWKS_EXAMPLE = {
  keys: [
    {
      kty: 'RSA',
      use: 'sig',
      kid: 'f9a7071b-0c11-4e16-b6ac-a064678e21fb',
      alg: 'RS256',
      e: 'AQAB',
      n: 'rnRUONRL2TUj…',
    },
  ],
};

const endpoint = (description: string) => Type.String({ format: 'uri', description });
const strings = Type.Array(Type.String());

/** OpenID Connect Discovery 1.0 §3, the fields this server publishes. */
export const OpenIdConfigurationSchema = component(
  'OpenIdConfiguration',
  Type.Object({
    issuer: endpoint('The issuer: every token names it'),
    authorization_endpoint: endpoint('`/authorize`'),
    token_endpoint: endpoint('`/token`'),
    userinfo_endpoint: endpoint('`/userinfo`'),
    jwks_uri: endpoint('`/jwks`'),
    revocation_endpoint: endpoint('`/revoke`'),
    end_session_endpoint: endpoint('`/session/end`'),
    pushed_authorization_request_endpoint: endpoint('`/request`'),
    scopes_supported: strings,
    response_types_supported: strings,
    response_modes_supported: strings,
    grant_types_supported: strings,
    subject_types_supported: strings,
    id_token_signing_alg_values_supported: strings,
    token_endpoint_auth_methods_supported: strings,
    code_challenge_methods_supported: strings,
    claims_supported: strings,
  }),
);

export const OPEN_ID_CONFIGURATION_EXAMPLE = {
  issuer: ISSUER,
  authorization_endpoint: `${ISSUER}/authorize`,
  token_endpoint: `${ISSUER}/token`,
  userinfo_endpoint: `${ISSUER}/userinfo`,
  jwks_uri: `${ISSUER}/jwks`,
  revocation_endpoint: `${ISSUER}/revoke`,
  end_session_endpoint: `${ISSUER}/session/end`,
  pushed_authorization_request_endpoint: `${ISSUER}/request`,
  scopes_supported: [
    'users:read',
    'departments:read',
    'locations:read',
    'incidents:read',
    'openid',
    'profile',
    'email',
    'employment',
  ],
  response_types_supported: ['code'],
  response_modes_supported: ['form_post', 'fragment', 'query'],
  grant_types_supported: ['authorization_code', 'refresh_token', 'client_credentials'],
  subject_types_supported: ['public'],
  id_token_signing_alg_values_supported: ['RS256'],
  token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
  code_challenge_methods_supported: ['S256'],
  claims_supported: ['sub', 'name', 'email', 'role', 'department', 'job_title'],
};
