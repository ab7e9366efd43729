import type { DestinationStream } from 'pino';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { Kysely } from 'kysely';
import type { KeyLookup } from './auth/key-lookup.ts';
import type { SharedGeneration } from './auth/shared-generation.ts';
import type { LastUseRecorder } from './auth/last-use.ts';
import type { PublicRateLimiter } from './auth/rate-limit.ts';
import type { SignIn } from './auth/sign-in.ts';
import type { Config } from './config.ts';
import type { Database } from './db/schema.ts';
import { ApiError, frameworkErrorOptions, registerErrorHandling } from './errors.ts';
import { loggerOptions, requestId } from './logging.ts';
import oauthPlugin from './oauth/plugin.ts';
import { registerObservability } from './observability.ts';
import { ADMIN_PATH, PUBLIC_API_PATH, WIDER_API_PATH } from './paths.ts';
import { adminRoutes } from './routes/admin/index.ts';
import { healthRoutes } from './routes/health.ts';
import { publicApiRoutes } from './routes/public/index.ts';
import { widerApiRoutes } from './routes/wider/index.ts';
import type { Services } from './services/index.ts';
import type { WebhookDeps } from './services/webhook-service.ts';
import type { WebhookDispatcher } from './webhooks/delivery.ts';

declare module 'fastify' {
  interface FastifyInstance {
    config: Config;
    db: Kysely<Database>;
    redis: Redis | null;
    keyLookup: KeyLookup;
    /** What the admin panel bumps after a change (`SharedGeneration`); `null` outside PostgreSQL with Redis. */
    sharedGeneration: SharedGeneration | null;
    rateLimiter: PublicRateLimiter;
    lastUse: LastUseRecorder;
    signIn: SignIn;
    webhookDeps: WebhookDeps;
    webhooks: WebhookDispatcher;
  }
}

/**
 * HTTP timeouts, so that no client holds a connection (and what its request holds) for long:
 * - headers must arrive within 10 s of the first byte (a slowloris client is cut off with 408);
 * - the whole request, body included, within 30 s (our request bodies are small forms);
 * - 60 s without any traffic ends a connection, also one that stopped reading a response;
 * - an idle kept-alive connection is kept 72 s: longer than the 60 s idle timeout of the usual
 *   load balancers, so the balancer closes first and never sends a request into our close.
 * Node checks the first two only every `connectionsCheckingInterval` (30 s by default): every
 * second here, so that they hold to about a second.
 */
const HEADERS_TIMEOUT_MS = 10_000;
const REQUEST_TIMEOUT_MS = 30_000;
const CONNECTION_TIMEOUT_MS = 60_000;
const KEEP_ALIVE_TIMEOUT_MS = 72_000;
const TIMEOUT_CHECK_INTERVAL_MS = 1000;

/**
 * One year, the least the HSTS preload list accepts and what common guidance recommends; with
 * subdomains, which under the API's own host name serve nothing over plain HTTP. No `preload`:
 * that commits the whole registrable domain, the operator's call, not this service's.
 */
const HSTS = 'max-age=31536000; includeSubDomains';

/**
 * Once the server is closing, a request that still arrives on an open connection (after one that
 * was in flight) is answered 503 with the contract's body and `Connection: close`, so the client or
 * balancer retries on another instance.
 */
function refuseRequestsWhileClosing(app: FastifyInstance): void {
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  app.addHook('onRequest', (_request, _reply, done) => {
    done(closing ? ApiError.shuttingDown() : undefined);
  });
}

/**
 * Builds the whole HTTP application on the given services; `server.ts` owns the process.
 * `logStream`: where log lines go instead of standard output (tests read them).
 */
export async function buildApp(
  config: Config,
  services: Services,
  { logStream }: { logStream?: DestinationStream } = {},
): Promise<FastifyInstance> {
  const app = Fastify({
    logger: { ...loggerOptions(config.logLevel), stream: logStream },
    genReqId: requestId,
    requestIdHeader: false,
    ...frameworkErrorOptions,
    // Answered below with the contract's body instead of Fastify's.
    return503OnClosing: false,
    trustProxy: config.trustProxy.length > 0 ? config.trustProxy : false,
    http: { headersTimeout: HEADERS_TIMEOUT_MS, connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS },
    requestTimeout: REQUEST_TIMEOUT_MS,
    connectionTimeout: CONNECTION_TIMEOUT_MS,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
  });

  app.decorate('config', config);
  app.decorate('db', services.database.db);
  app.decorate('redis', services.redis);
  app.decorate('keyLookup', services.keyLookup);
  app.decorate('sharedGeneration', services.sharedGeneration);
  app.decorate('rateLimiter', services.rateLimiter);
  app.decorate('lastUse', services.lastUse);
  app.decorate('signIn', services.signIn);
  app.decorate('webhookDeps', services.webhookDeps);
  app.decorate('webhooks', services.webhooks);
  app.decorateRequest('apiKey', null as never);

  // Synchronous (callback style): an async hook would cost a promise and a tick on every request.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });
  // Set on the raw response, so that responses Fastify does not send itself (the OAuth provider's)
  // carry it too.
  if (new URL(config.baseUrl).protocol === 'https:') {
    app.addHook('onRequest', (_request, reply, done) => {
      reply.raw.setHeader('strict-transport-security', HSTS);
      done();
    });
  }
  refuseRequestsWhileClosing(app);
  registerErrorHandling(app);
  registerObservability(app);

  await app.register(healthRoutes);
  await app.register(publicApiRoutes, { prefix: PUBLIC_API_PATH });
  await app.register(adminRoutes, { prefix: ADMIN_PATH });
  await app.register(oauthPlugin);
  await app.register(widerApiRoutes, { prefix: WIDER_API_PATH });
  return app;
}
