import type { FastifyInstance, FastifyRequest } from 'fastify';
import { authenticateApiKey } from '../../auth/api-keys.ts';
import { cacheBudgets } from '../../config.ts';
import { ApiError } from '../../errors.ts';
import { changeRoutes } from './changes.ts';
import { departmentAndLocationRoutes } from './departments-and-locations.ts';
import { exportRoutes } from './exports.ts';
import { incidentRoutes } from './incidents.ts';
import { cachedResponder, type PublicRoutes } from './response-cache.ts';
import { userRoutes } from './users.ts';

/**
 * The public API's read endpoints. Adding one is a route file and a line here: the key checks, the
 * 404 and 405 answers (`unrouted`), caching and ETags, metrics and the OpenAPI document all
 * come with the registration.
 */
const PUBLIC_ROUTES: PublicRoutes[] = [
  incidentRoutes,
  userRoutes,
  departmentAndLocationRoutes,
  exportRoutes,
  changeRoutes,
];

/**
 * What no route takes: an unknown path, or a method other than GET and HEAD (a `read` key was
 * already refused by the scope check; a key whose scope allows writes learns which methods exist).
 * Runs in onRequest, after the key checks, so no request body is ever parsed.
 */
function unrouted(request: FastifyRequest): ApiError | undefined {
  return request.is404 ? ApiError.unrouted(request.method) : undefined;
}

/** Mounted at /api/v1/public. Every request here, routed or not, runs the API-key check first. */
export async function publicApiRoutes(app: FastifyInstance): Promise<void> {
  app.decorateRequest('rateLimitWindow', null as never);
  app.decorateRequest('usageKeyId', null);
  app.addHook('onRequest', authenticateApiKey);
  // Synchronous, and only a counter in memory: the recorder writes every 10 s (`KeyUsageRecorder`).
  app.addHook('onResponse', (request, reply, done) => {
    if (request.usageKeyId !== null)
      request.server.keyUsage.record(request.usageKeyId, reply.statusCode, Date.now());
    done();
  });
  // Synchronous (callback style): an async hook would cost a promise and a tick on every request.
  app.addHook('onRequest', (request, _reply, done) => done(unrouted(request)));
  app.setNotFoundHandler(async (request) => {
    throw ApiError.unrouted(request.method);
  });

  // The response body cache of the server process: its share of CACHE_MAX_MB (see response-cache.ts).
  const routeOptions = { respond: cachedResponder(cacheBudgets(app.config.cacheMaxMb).responseBodies) };
  for (const routes of PUBLIC_ROUTES) await app.register(routes, routeOptions);
}
