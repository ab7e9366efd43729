import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { oauthPayloadRepository } from '../db/repositories/oauth-payloads.ts';
import { isStoreUnavailable, STORE_RETRY_AFTER_SECONDS } from '../db/store-health.ts';
import { ApiError } from '../errors.ts';
import { OAUTH_PATH } from '../paths.ts';
import { type AccessTokenVerifier, accessTokenVerifier } from './access-tokens.ts';
import { OAUTH_ENDPOINTS } from './endpoints.ts';
import { interactionRoutes } from './interactions.ts';
import { loadOauthKeys } from './keys.ts';
import { createOauthProvider, REFRESH_ROUTE } from './provider.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** Resolves an OAuth 2 access token to what it may read; used by the wider API. */
    verifyAccessToken: AccessTokenVerifier;
  }
}

// oidc-provider's own limit for request bodies.
const MAX_BODY_BYTES = 56 * 1024;
const PRUNE_INTERVAL_MS = 10 * 60 * 1000;
const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

type MountedRequest = IncomingMessage & { originalUrl?: string };

/**
 * `/token/refresh` is `/token` with `grant_type=refresh_token` implied: the form body is read,
 * given that grant type, and replayed to the provider as a request to `/token`.
 */
async function asRefreshGrant(req: IncomingMessage): Promise<IncomingMessage | null> {
  if (!String(req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')) return req;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return null;
    chunks.push(chunk as Buffer);
  }
  const params = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
  params.set('grant_type', 'refresh_token');
  const body = Buffer.from(params.toString());

  const replay = new PassThrough();
  Object.assign(replay, {
    method: req.method,
    url: req.url,
    headers: { ...req.headers, 'content-length': String(body.length) },
    rawHeaders: req.rawHeaders,
    httpVersion: req.httpVersion,
    httpVersionMajor: req.httpVersionMajor,
    httpVersionMinor: req.httpVersionMinor,
    socket: req.socket,
  });
  replay.end(body);
  return replay as unknown as IncomingMessage;
}

/**
 * The authorization server, mounted at OAUTH_PATH. oidc-provider is a Koa application: requests
 * are handed to it in `onRequest`, before Fastify reads the body, with the URL made relative to
 * the mount. Only the sign-in and consent pages (`/interaction/…`) are Fastify routes.
 */
async function oauthPlugin(app: FastifyInstance): Promise<void> {
  const keys = await loadOauthKeys(app.db, app.config);
  const provider = await createOauthProvider(app.config.baseUrl, app.db, keys);
  // oidc-provider answers any error of its store as a 500 server_error; an outage is a 503 with
  // Retry-After, so clients retry instead of giving up (and is logged once, by the store monitor).
  const storeDown = new WeakSet<object>();
  provider.on('server_error', (ctx, error) => {
    if (isStoreUnavailable(error)) storeDown.add(ctx);
    else app.log.error({ err: error }, 'OAuth server error');
  });
  provider.use(async (ctx, next) => {
    try {
      await next();
    } catch (error) {
      if (!isStoreUnavailable(error)) throw error;
      storeDown.add(ctx);
    }
    // A redirect carries the error to the client's own page: left as the provider made it.
    if (!storeDown.has(ctx) || (ctx.status >= 300 && ctx.status < 400)) return;
    ctx.status = 503;
    ctx.set('retry-after', String(STORE_RETRY_AFTER_SECONDS));
    // DESIGN's body on every surface; an HTML page (an error rendered for a browser) stays a page.
    if (typeof ctx.body !== 'string') ctx.body = ApiError.storeUnavailable().body;
  });
  const handle = provider.callback();
  const publicOrigin = new URL(app.config.baseUrl);

  app.decorate('verifyAccessToken', accessTokenVerifier(provider, app.db));

  const prune = setInterval(() => {
    oauthPayloadRepository
      .deleteExpired(app.db, new Date().toISOString())
      .catch((error) => app.log.error({ err: error }, 'could not prune expired OAuth records'));
  }, PRUNE_INTERVAL_MS);
  prune.unref();
  app.addHook('onClose', async () => {
    clearInterval(prune);
  });

  async function handToProvider(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    reply.hijack();
    const res = reply.raw;
    res.setHeader('x-request-id', request.id);
    const original = request.raw as MountedRequest;
    Object.assign(original.headers, {
      'x-forwarded-proto': publicOrigin.protocol.slice(0, -1),
      'x-forwarded-host': publicOrigin.host,
      'x-forwarded-for': request.ip,
    });
    const fullUrl = original.url ?? OAUTH_PATH;
    const relative = fullUrl.slice(OAUTH_PATH.length) || '/';
    const isRefresh = request.method === 'POST' && new URL(relative, 'http://x').pathname === REFRESH_ROUTE;

    const req = (isRefresh ? await asRefreshGrant(original) : original) as MountedRequest | null;
    if (req === null) {
      res
        .writeHead(413, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: 'invalid_request', error_description: 'request body too large' }));
      return;
    }
    // oidc-provider derives its mount path from originalUrl minus url, as under Express.
    req.originalUrl = isRefresh ? `${OAUTH_PATH}/token` : fullUrl;
    req.url = isRefresh ? '/token' : relative;
    try {
      await handle(req, res);
    } finally {
      // Whatever the provider left running after its answer is no longer the request's.
      request.storeBudget.end();
    }
  }

  await app.register(
    async (scope) => {
      await scope.register(interactionRoutes, {
        provider,
        formTokenSecret: keys.cookieKeys[0] as string,
      });
      scope.route({
        method: [...HTTP_METHODS],
        url: '/*',
        config: { openapi: { delegated: OAUTH_ENDPOINTS } },
        onRequest: handToProvider,
        handler: async () => {
          throw new Error('unreachable: the OAuth provider answers in onRequest');
        },
      });
    },
    { prefix: OAUTH_PATH },
  );
}

export default fp(oauthPlugin, { name: 'oauth' });
