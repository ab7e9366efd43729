import { type TSchema, Type } from 'typebox';
import { OAUTH_PATH } from '../paths.ts';
import {
  AuthorizationQuerySchema,
  EndSessionQuerySchema,
  JsonWebKeySetSchema,
  JWKS_EXAMPLE,
  OAuthErrorSchema,
  OPEN_ID_CONFIGURATION_EXAMPLE,
  OpenIdConfigurationSchema,
  PAGE_CONTENT,
  PushedAuthorizationRequestSchema,
  PushedAuthorizationResponseSchema,
  RefreshRequestSchema,
  RevocationRequestSchema,
  TOKEN_EXAMPLE,
  TokenRequestSchema,
  TokenResponseSchema,
  USER_INFO_EXAMPLE,
  UserInfoRequestSchema,
  UserInfoSchema,
} from '../schemas/oauth.ts';
import { type DelegatedRoute, HEADERS, type ResponseDoc, TAGS } from '../schemas/openapi.ts';
import { ErrorSchema } from '../schemas/public.ts';
import { PROVIDER_ROUTES, REFRESH_ROUTE } from './provider.ts';

/**
 * The endpoints the OAuth provider answers behind the plugin's wildcard route (plugin.ts), as the
 * OpenAPI document lists them: those its discovery document advertises, the discovery document
 * itself, and `/token/refresh`. The pages a browser passes through on the way (sign-in, consent,
 * the sign-out confirmation) are not operations and are not listed.
 */

/** Fixed by OpenID Connect Discovery, relative to the issuer. */
const DISCOVERY_ROUTE = '/.well-known/openid-configuration';

const FORM = 'application/x-www-form-urlencoded';
const form = (schema: TSchema) => ({
  content: { [FORM]: { schema } },
});

/** A confidential client authenticates (Basic, or in the form); a public client sends its id only. */
const CLIENT_AUTHENTICATION: Record<string, string[]>[] = [{ oauthClient: [] }, {}];

const page = (description: string): ResponseDoc => ({ description, content: PAGE_CONTENT });

const invalidRequest = (description: string): ResponseDoc => ({
  description,
  examples: {
    invalidRequest: { error: 'invalid_request', error_description: 'missing required parameter' },
  },
});

const invalidClient: ResponseDoc = {
  description: 'The client is unknown, or its authentication failed (`invalid_client`).',
  examples: {
    invalidClient: { error: 'invalid_client', error_description: 'client authentication failed' },
  },
};

const tokens = (description: string): ResponseDoc => ({
  description,
  examples: { tokens: TOKEN_EXAMPLE },
});

const tag = [TAGS.oauth.name];

const REDIRECTING = 'Redirecting to /integration/v1/oauth2/interaction/Jk3bA0yq6Xo1c8h4mZ2sR.';

export const OAUTH_ENDPOINTS: DelegatedRoute[] = [
  {
    method: 'GET',
    url: `${OAUTH_PATH}${DISCOVERY_ROUTE}`,
    schema: {
      operationId: 'getOpenIdConfiguration',
      tags: tag,
      summary: 'The OpenID Connect discovery document',
      description:
        "The server's endpoints, scopes, grant types and methods, for a client library to configure itself.",
      response: { 200: OpenIdConfigurationSchema },
    },
    config: {
      openapi: {
        responses: {
          200: {
            description: 'The discovery document.',
            examples: { discovery: OPEN_ID_CONFIGURATION_EXAMPLE },
          },
        },
      },
    },
  },
  {
    method: 'GET',
    url: `${OAUTH_PATH}${PROVIDER_ROUTES.jwks}`,
    schema: {
      operationId: 'getJwks',
      tags: tag,
      summary: 'The public keys that sign ID tokens',
    },
    config: {
      openapi: {
        responses: {
          200: {
            description: 'A JSON Web Key Set (RFC 7517).',
            content: { 'application/jwk-set+json': { schema: JsonWebKeySetSchema, example: JWKS_EXAMPLE } },
          },
        },
      },
    },
  },
  {
    method: 'GET',
    url: `${OAUTH_PATH}${PROVIDER_ROUTES.authorization}`,
    schema: {
      operationId: 'authorize',
      tags: tag,
      summary: 'Ask a user to let a client read the account (authorization code with PKCE)',
      description:
        'Where a client sends the browser. The user signs in and approves the scopes on pages of this server, and the browser returns to `redirect_uri` with a `code` (and `state`, `iss`) or an `error`; the client redeems the code at `/token` with its `code_verifier`. PKCE with S256 is required of every client. Only an Admin or Super Admin may approve the account-wide data scopes; other users may approve `openid profile email employment`.',
      querystring: AuthorizationQuerySchema,
    },
    config: {
      openapi: {
        responses: {
          200: page(
            'With `response_mode=form_post`: the `code` in a form the page posts to `redirect_uri` (a user already signed in who granted these scopes before).',
          ),
          303: {
            description:
              'To the sign-in and consent pages, or back to `redirect_uri` with the result (`code`, or `error` and `error_description`) in the query or fragment.',
            headers: [HEADERS.location],
            // For people only: a client follows `Location`.
            content: {
              'text/html': { schema: Type.String(), example: REDIRECTING },
              'text/plain': { schema: Type.String(), example: REDIRECTING },
            },
          },
          400: page(
            'The request cannot be answered at `redirect_uri` (an unknown client, a redirect URI not registered for it): a page says why. With `response_mode=form_post`, the `error` in a form the page posts to `redirect_uri`.',
          ),
        },
      },
    },
  },
  {
    method: 'POST',
    url: `${OAUTH_PATH}${PROVIDER_ROUTES.pushed_authorization_request}`,
    schema: {
      operationId: 'pushAuthorizationRequest',
      tags: tag,
      summary: 'Send the parameters of an authorization request ahead (RFC 9126)',
      description:
        'The client sends the parameters of `/authorize` here, authenticated, and sends the browser to `/authorize` with only `client_id` and the `request_uri` it got.',
      security: CLIENT_AUTHENTICATION,
      body: form(PushedAuthorizationRequestSchema),
      response: { 201: PushedAuthorizationResponseSchema, 400: OAuthErrorSchema, 401: OAuthErrorSchema },
    },
    config: {
      openapi: {
        responses: {
          201: {
            description: 'The request is stored: use `request_uri` within `expires_in` seconds.',
            examples: {
              pushed: {
                request_uri: 'urn:ietf:params:oauth:request_uri:Qm3tV8cR5nP2wL7eH4sD9',
                expires_in: 60,
              },
            },
          },
          400: invalidRequest('A parameter is missing or not acceptable.'),
          401: invalidClient,
        },
      },
    },
  },
  {
    method: 'POST',
    url: `${OAUTH_PATH}${PROVIDER_ROUTES.token}`,
    schema: {
      operationId: 'createToken',
      tags: tag,
      summary: 'Get tokens: for an authorization code, a refresh token, or the client itself',
      description:
        '`authorization_code` (with the PKCE `code_verifier`) and `refresh_token` act for the user who approved; `client_credentials` for the client alone, with the account-wide data scopes registered for it. Every refresh returns a new refresh token and spends the old one: a spent refresh token used again revokes the whole grant. No new tokens for an account whose plan has no API access.',
      security: CLIENT_AUTHENTICATION,
      body: form(TokenRequestSchema),
      response: { 200: TokenResponseSchema, 400: OAuthErrorSchema, 401: OAuthErrorSchema },
    },
    config: {
      openapi: {
        responses: {
          200: tokens('The tokens.'),
          400: invalidRequest(
            'The grant is unknown, spent, expired or not this client’s (`invalid_grant`), or the request is not acceptable (`invalid_request`, `unsupported_grant_type`, `invalid_scope`).',
          ),
          401: invalidClient,
        },
      },
    },
  },
  {
    method: 'POST',
    url: `${OAUTH_PATH}${REFRESH_ROUTE}`,
    schema: {
      operationId: 'refreshToken',
      tags: tag,
      summary: 'Get new tokens for a refresh token',
      description:
        '`/token` with `grant_type=refresh_token` implied. The refresh token rotates: the answer holds a new one, and the one sent is spent (using it again revokes the whole grant).',
      security: CLIENT_AUTHENTICATION,
      body: form(RefreshRequestSchema),
      response: { 200: TokenResponseSchema, 400: OAuthErrorSchema, 401: OAuthErrorSchema },
    },
    config: {
      openapi: {
        responses: {
          200: tokens('The new tokens, with a new refresh token.'),
          400: invalidRequest(
            'The refresh token is unknown, spent or expired (`invalid_grant`), or the request is not acceptable.',
          ),
          401: invalidClient,
          413: {
            description: 'A form over 56 KiB (`OAuthError`), or any body over 1 MiB (`Error`).',
            content: {
              'application/json': {
                schema: Type.Union([OAuthErrorSchema, ErrorSchema]),
                example: { error: 'invalid_request', error_description: 'request body too large' },
              },
            },
          },
        },
      },
    },
  },
  {
    method: 'POST',
    url: `${OAUTH_PATH}${PROVIDER_ROUTES.revocation}`,
    schema: {
      operationId: 'revokeToken',
      tags: tag,
      summary: 'Revoke an access or refresh token (RFC 7009)',
      description:
        "Revoking a refresh token ends its grant, and the grant's access tokens with it. A token that is unknown, already revoked or another client's is ignored, with the same answer.",
      security: CLIENT_AUTHENTICATION,
      body: form(RevocationRequestSchema),
      response: { 400: OAuthErrorSchema, 401: OAuthErrorSchema },
    },
    config: {
      openapi: {
        responses: {
          200: { description: 'Revoked, or nothing to revoke. No body.' },
          400: invalidRequest('`token` is missing, or the request is not acceptable.'),
          401: invalidClient,
        },
      },
    },
  },
  ...(['GET', 'POST'] as const).map((method): DelegatedRoute => ({
    method,
    url: `${OAUTH_PATH}${PROVIDER_ROUTES.userinfo}`,
    schema: {
      operationId: method === 'GET' ? 'getUserInfo' : 'getUserInfoByPost',
      tags: tag,
      summary:
        method === 'GET'
          ? "The signed-in user's claims (OpenID Connect userinfo)"
          : "The signed-in user's claims, asked with POST (OpenID Connect userinfo)",
      description:
        'For an access token of the authorization code grant with the `openid` scope: `sub`, and the claims the other granted scopes release (`profile`: name; `email`; `employment`: role, department, job title).',
      security: [{ oauth2: ['openid'] }],
      ...(method === 'POST' ? { body: form(UserInfoRequestSchema) } : {}),
      response: { 200: UserInfoSchema, 400: OAuthErrorSchema, 401: OAuthErrorSchema },
    },
    config: {
      openapi: {
        responses: {
          200: { description: 'The claims.', examples: { claims: USER_INFO_EXAMPLE } },
          400: invalidRequest('The request is not acceptable (a token both in the header and the form).'),
          401: {
            description:
              'No access token, or one that is invalid, expired, revoked or without `openid` (`invalid_token`).',
            headers: [HEADERS.wwwAuthenticate],
            examples: {
              invalidToken: { error: 'invalid_token', error_description: 'invalid token provided' },
            },
          },
        },
      },
    },
  })),
  {
    method: 'GET',
    url: `${OAUTH_PATH}${PROVIDER_ROUTES.end_session}`,
    schema: {
      operationId: 'endSession',
      tags: tag,
      summary: 'Sign the user out of this server (OpenID Connect RP-initiated logout)',
      description:
        "Where a client sends the browser to end the user's session here; then back to `post_logout_redirect_uri`, if the client registered it. Tokens already issued stay valid: revoke them at `/revoke`.",
      querystring: EndSessionQuerySchema,
      response: { 400: OAuthErrorSchema },
    },
    config: {
      openapi: {
        responses: {
          200: page('A page that confirms the sign-out (submitted by the browser at once).'),
          400: page(
            'A parameter is not acceptable (an `id_token_hint` this server did not issue, a `post_logout_redirect_uri` not registered): a page for a browser (`Accept: text/html`), else an `OAuthError`.',
          ),
        },
      },
    },
  },
];
