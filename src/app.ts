import type { IncomingMessage } from 'node:http';
import { finished } from 'node:stream';
import type { DestinationStream } from 'pino';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { Kysely } from 'kysely';
import type { KeyLookup } from './auth/key-lookup.ts';
import type { SharedGeneration } from './auth/shared-generation.ts';
import type { KeyUsageRecorder } from './auth/key-usage.ts';
import type { LastUseRecorder } from './auth/last-use.ts';
import type { PublicRateLimiter } from './auth/rate-limit.ts';
import type { SignIn } from './auth/sign-in.ts';
import type { Config } from './config.ts';
import type { Database } from './db/schema.ts';
import { newRequestBudget, type RequestBudget, runInBudget } from './db/store-context.ts';
import { ApiError, BODY_LIMIT_BYTES, frameworkErrorOptions, registerErrorHandling } from './errors.ts';
import { loggerOptions, requestId } from './logging.ts';
import oauthPlugin from './oauth/plugin.ts';
import { registerObservability } from './observability.ts';
import { ADMIN_PATH, PUBLIC_API_PATH, WIDER_API_PATH } from './paths.ts';
import { adminRoutes } from './routes/admin/index.ts';
import { healthRoutes } from './routes/health.ts';
import { publicApiRoutes } from './routes/public/index.ts';
import { widerApiRoutes } from './routes/wider/index.ts';
import type { Runtime } from './runtime.ts';
import { activeTracing } from './telemetry/tracing.ts';
import type { Services } from './services/services.ts';
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
    keyUsage: KeyUsageRecorder;
    signIn: SignIn;
    /** The services built on `db` (`buildServices`). */
    services: Services;
    /** This instance's webhook deliveries (their metrics, their pace). */
    delivery: WebhookDispatcher;
  }
  interface FastifyRequest {
    /** The request's one budget for the store (`store-context.ts`). */
    storeBudget: RequestBudget;
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

/** Whether a request has a body to come (RFC 9112 §6.3): chunked, or a length above 0. */
function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

/**
 * Request bodies, on every path:
 * - A body declared (Content-Length) over BODY_LIMIT_BYTES is refused with 413 from the request's
 *   head, before any surface looks at it: like headers too large for the parser, it is a limit of
 *   the message, not of an API, so it comes before credentials. A body of no declared length
 *   (chunked) is refused with the same 413 where it is read, by Fastify's parser at the same
 *   limit; the read-only APIs read none, and answer from the head (401, 403, 405, …).
 * - An answer that goes out before the request's body was read closes the connection, which is
 *   not kept for a body nobody wanted. It waits until the rest of the body has arrived, read and
 *   dropped (within the request timeout): a socket closed while the client still sends is reset
 *   by the kernel, and a reset can make the client lose the answer. So the client gets the whole
 *   answer and a FIN, never a reset. (The OAuth provider's answers bypass onSend: there the rest
 *   is dropped after the answer, then the connection closed.)
 */
function guardRequestBodies(app: FastifyInstance): void {
  app.addHook('onRequest', (request, reply, done) => {
    const req = request.raw;
    if (hasBody(req)) {
      // The OAuth provider answers past Fastify (no onSend), and may stop reading a body it
      // refuses: the rest is dropped here, then the connection closed, or it would stall until
      // the request timeout with the answer already sent.
      reply.raw.once('finish', () => {
        if (!req.readableEnded) finished(req.resume(), () => req.socket.end());
      });
    }
    const declared = Number(request.headers['content-length']);
    done(declared > BODY_LIMIT_BYTES ? ApiError.payloadTooLarge() : undefined);
  });
  app.addHook('onSend', (request, reply, payload, done) => {
    const req = request.raw;
    if (!hasBody(req) || req.readableEnded) {
      done(null, payload);
      return;
    }
    reply.header('connection', 'close');
    finished(req.resume(), () => done(null, payload));
  });
}

/**
 * Builds the whole HTTP application on the process's runtime (`openRuntime`); `server.ts` owns the process.
 * `logStream`: where log lines go instead of standard output (tests read them).
 */
export async function buildApp(
  config: Config,
  runtime: Runtime,
  { logStream }: { logStream?: DestinationStream } = {},
): Promise<FastifyInstance> {
  const app = Fastify({
    logger: { ...loggerOptions(config.logLevel), stream: logStream },
    genReqId: requestId,
    requestIdHeader: false,
    ...frameworkErrorOptions,
    bodyLimit: BODY_LIMIT_BYTES,
    // Answered below with the contract's body instead of Fastify's.
    return503OnClosing: false,
    trustProxy: config.trustProxy.length > 0 ? config.trustProxy : false,
    http: { headersTimeout: HEADERS_TIMEOUT_MS, connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS },
    requestTimeout: REQUEST_TIMEOUT_MS,
    connectionTimeout: CONNECTION_TIMEOUT_MS,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
  });

  // The request's span begins before any other hook runs, so that all of the request is inside it.
  await activeTracing()?.instrument(app);

  app.decorate('config', config);
  app.decorate('db', runtime.database.db);
  app.decorate('redis', runtime.redis);
  app.decorate('keyLookup', runtime.keyLookup);
  app.decorate('sharedGeneration', runtime.sharedGeneration);
  app.decorate('rateLimiter', runtime.rateLimiter);
  app.decorate('lastUse', runtime.lastUse);
  app.decorate('keyUsage', runtime.keyUsage);
  app.decorate('signIn', runtime.signIn);
  app.decorate('services', runtime.services);
  app.decorate('delivery', runtime.delivery);
  app.decorateRequest('apiKey', null as never);
  app.decorateRequest('storeBudget', null as never);

  // Synchronous (callback style): an async hook would cost a promise and a tick on every request.
  // The store budget starts here, before anything of the request can wait on the store.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    request.storeBudget = newRequestBudget();
    runInBudget(request.storeBudget, done);
  });
  // A body is read from the socket's events, which run outside the request's context: what
  // follows it is put back under the request's budget.
  app.addHook('preValidation', (request, _reply, done) => {
    if (hasBody(request.raw)) runInBudget(request.storeBudget, done);
    else done();
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
  guardRequestBodies(app);
  registerErrorHandling(app);
  registerObservability(app);

  await app.register(healthRoutes);
  await app.register(publicApiRoutes, { prefix: PUBLIC_API_PATH });
  await app.register(adminRoutes, { prefix: ADMIN_PATH });
  await app.register(oauthPlugin);
  await app.register(widerApiRoutes, { prefix: WIDER_API_PATH });
  return app;
}
