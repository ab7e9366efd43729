import type { DestinationStream } from 'pino';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { Kysely } from 'kysely';
import type { KeyLookup } from './auth/key-lookup.ts';
import type { LastUseRecorder } from './auth/last-use.ts';
import type { PublicRateLimiter } from './auth/rate-limit.ts';
import type { SignIn } from './auth/sign-in.ts';
import type { Config } from './config.ts';
import type { Database } from './db/schema.ts';
import { frameworkErrorOptions, registerErrorHandling } from './errors.ts';
import { loggerOptions, requestId } from './logging.ts';
import oauthPlugin from './oauth/plugin.ts';
import { registerObservability } from './observability.ts';
import { adminRoutes } from './routes/admin/index.ts';
import { publicApiRoutes } from './routes/public/index.ts';
import { widerApiRoutes } from './routes/wider/index.ts';
import type { Services } from './services/index.ts';

declare module 'fastify' {
  interface FastifyInstance {
    config: Config;
    db: Kysely<Database>;
    redis: Redis | null;
    keyLookup: KeyLookup;
    rateLimiter: PublicRateLimiter;
    lastUse: LastUseRecorder;
    signIn: SignIn;
  }
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
    return503OnClosing: true,
    ...frameworkErrorOptions,
  });

  app.decorate('config', config);
  app.decorate('db', services.database.db);
  app.decorate('redis', services.redis);
  app.decorate('keyLookup', services.keyLookup);
  app.decorate('rateLimiter', services.rateLimiter);
  app.decorate('lastUse', services.lastUse);
  app.decorate('signIn', services.signIn);
  app.decorateRequest('apiKey', null as never);

  // Synchronous (callback style): an async hook would cost a promise and a tick on every request.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });
  registerErrorHandling(app);
  registerObservability(app);

  await app.register(publicApiRoutes, { prefix: '/api/v1/public' });
  await app.register(adminRoutes, { prefix: '/admin' });
  await app.register(oauthPlugin);
  await app.register(widerApiRoutes, { prefix: '/api/v1' });
  return app;
}
