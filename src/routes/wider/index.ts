import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type TSchema, Type } from 'typebox';
import { soleAuthorization } from '../../auth/authorization-header.ts';
import { ApiError } from '../../errors.ts';
import type { TokenPrincipal } from '../../oauth/access-tokens.ts';
import { apiScopeFor, type WiderApiResource } from '../../oauth/scopes.ts';
import { BEARER_REALM as REALM } from '../../paths.ts';
import { TAGS } from '../../schemas/openapi.ts';
import {
  ErrorSchema,
  INCIDENT_EXAMPLE,
  IncidentSchema,
  NAMED_RESOURCES,
  USER_EXAMPLE,
  UserSchema,
} from '../../schemas/public.ts';
import { directoryService, NAMED_RESOURCE_TABLES } from '../../services/directory-service.ts';
import {
  DEFAULT_LIMIT,
  type PageRequest,
  PageQuerySchema,
  PaginationSchema,
  pagination,
  parsePageRequest,
} from './pagination.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The verified OAuth 2 access token; set on wider-API routes. */
    oauthPrincipal: TokenPrincipal;
  }
}

const BEARER = /^Bearer ([A-Za-z0-9._~+/-]+=*)$/;

function unauthorized(message: string, tokenGiven: boolean): ApiError {
  const challenge = tokenGiven ? `${REALM}, error="invalid_token", error_description="${message}"` : REALM;
  return new ApiError(401, null, message, { 'www-authenticate': challenge });
}

async function authenticateAccessToken(request: FastifyRequest): Promise<void> {
  const token = BEARER.exec(soleAuthorization(request) ?? '')?.[1];
  if (token === undefined)
    throw unauthorized('An OAuth 2 access token is required: send "Authorization: Bearer <token>".', false);
  if (token.startsWith('svc_')) {
    throw unauthorized('API keys are not accepted here: this API takes OAuth 2 access tokens.', true);
  }
  const principal = await request.server.verifyAccessToken(token);
  if (principal === null) throw unauthorized('The access token is invalid, expired or revoked.', true);
  request.oauthPrincipal = principal;
}

function requireScope(request: FastifyRequest, scope: string): void {
  if (request.oauthPrincipal.scopes.has(scope)) return;
  throw new ApiError(403, null, `The access token lacks the "${scope}" scope.`, {
    'www-authenticate': `${REALM}, error="insufficient_scope", scope="${scope}"`,
  });
}

// OAuth client ids never look like this, and API key ids are UUIDs: the two kinds of count never mix.
const rateLimitKey = (clientId: string): string => `oauth-client:${clientId}`;

/**
 * After the token check, in DESIGN's order: the account's plan, the token's scope for this list
 * (`null`: a request no route takes needs none), then the hourly allowance, counted per OAuth
 * client in the process's one (Redis-shared) limiter.
 */
function admit(scope: string | null) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const principal = request.oauthPrincipal;
    if (!principal.apiAccess) throw ApiError.featureNotAvailable();
    if (scope !== null) requireScope(request, scope);
    const allowance = principal.rateLimitPerHour;
    const window = await request.server.rateLimiter.consume(rateLimitKey(principal.clientId), allowance);
    if (!window.allowed) {
      throw ApiError.rateLimitExceeded(allowance, window.retryAfterSeconds, 'this OAuth client');
    }
    reply
      .header('x-ratelimit-limit', allowance)
      .header('x-ratelimit-remaining', window.remaining)
      .header('x-ratelimit-reset', window.resetEpochSeconds);
  };
}

/** Items `start` … `start + limit - 1` of a list read whole; these lists are an account's staff and places. */
function slice<T>(items: T[], page: PageRequest): T[] {
  return items.slice(page.start, page.start + page.limit);
}

/** The public API's names, with the paging that sets these lists apart. */
const OPERATION_IDS: Record<WiderApiResource, string> = {
  users: 'listUsersPaged',
  departments: 'listDepartmentsPaged',
  locations: 'listLocationsPaged',
  incidents: 'listIncidentsPaged',
};

const admitUnrouted = admit(null);

/**
 * What no route takes (an unknown path, a method other than GET and HEAD) is answered in
 * onRequest, after the token, plan and allowance, so no request body is ever parsed.
 */
async function refuseUnrouted(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  if (!request.is404) return;
  await admitUnrouted(request, reply);
  throw ApiError.unrouted(request.method);
}

/**
 * Mounted at /api/v1: the wider API, read with OAuth 2 access tokens of the account's clients.
 * Every list pages with `_start`/`_limit` and answers `{ response, pagination }`.
 */
export const widerApiRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.decorateRequest('oauthPrincipal', null as never);
  app.addHook('onRequest', authenticateAccessToken);
  app.addHook('onRequest', refuseUnrouted);
  app.setNotFoundHandler(refuseUnrouted);

  const list = <T>(
    resource: WiderApiResource,
    item: { schema: TSchema; example: unknown },
    read: (accountId: string, page: PageRequest) => Promise<{ items: T[]; total: number }>,
  ) =>
    app.get(
      `/${resource}`,
      {
        schema: {
          operationId: OPERATION_IDS[resource],
          tags: [TAGS.widerApi.name],
          summary: `List ${resource}, paged`,
          description: `The same records and order as the public API, ${DEFAULT_LIMIT} at a time unless \`_limit\` says otherwise. Needs an access token with the \`${apiScopeFor(resource)}\` scope.`,
          security: [{ oauth2: [apiScopeFor(resource)] }],
          // Admits any value: `parsePageRequest` answers a bad or repeated `_start`/`_limit` with a
          // message that names it, in this API's error shape.
          querystring: PageQuerySchema,
          response: {
            200: Type.Object({ response: Type.Array(item.schema), pagination: PaginationSchema }),
            400: ErrorSchema,
          },
        },
        config: {
          openapi: {
            responses: {
              200: {
                description: `One page of ${resource} and the pagination of the whole list.`,
                examples: {
                  firstPage: {
                    response: [item.example],
                    pagination: { totalRecords: 1, perPage: 20, totalPages: 1, start: 0, currentPage: 1 },
                  },
                },
              },
              400: {
                description: '`_start` or `_limit` is not a whole number in range; the message names it.',
                examples: {
                  badLimit: { error: true, message: '_limit must be a whole number from 1 to 100 (got "0")' },
                },
              },
            },
          },
        },
        // Route-level onRequest hooks run after the instance's token check, before any validation.
        onRequest: admit(apiScopeFor(resource)),
      },
      async (request) => {
        const page = parsePageRequest(request.query);
        const { items, total } = await read(request.oauthPrincipal.accountId, page);
        return { response: items, pagination: pagination(page, total) };
      },
    );

  list('users', { schema: UserSchema, example: USER_EXAMPLE }, async (accountId, page) => {
    const users = await directoryService.listUsers(app.db, accountId);
    return { items: slice(users, page), total: users.length };
  });

  for (const table of NAMED_RESOURCE_TABLES) {
    list(table, NAMED_RESOURCES[table], async (accountId, page) => {
      const rows = await directoryService.listNamedResources(app.db, table, accountId);
      return { items: slice(rows, page), total: rows.length };
    });
  }

  list('incidents', { schema: IncidentSchema, example: INCIDENT_EXAMPLE }, async (accountId, page) => {
    const totals = await app.services.incidents.totals(accountId);
    const total = totals.total;
    const items = await app.services.incidents.listNewestFirst(accountId, totals, page.start, page.limit);
    return { items, total };
  });
};
