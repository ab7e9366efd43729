import type { FastifyInstance } from 'fastify';
import { authenticateApiKey } from '../../auth/api-keys.ts';
import { ApiError } from '../../errors.ts';
import { departmentAndLocationRoutes } from './departments-and-locations.ts';
import { incidentRoutes } from './incidents.ts';
import { cachedResponder, ResponseCache } from './response-cache.ts';
import { userRoutes } from './users.ts';

const WRITE_METHODS = ['POST', 'PUT', 'PATCH', 'DELETE'] as const;
const PUBLIC_PATHS = ['/incidents', '/incidents/:id', '/users', '/departments', '/locations'];
/** Bound of the response body cache of one server process (see response-cache.ts). */
const RESPONSE_CACHE_BYTES = 32 * 1024 * 1024;

/** Mounted at /api/v1/public. Every route here runs the API-key check first. */
export async function publicApiRoutes(app: FastifyInstance): Promise<void> {
  app.addHook('onRequest', authenticateApiKey);

  const routeOptions = { respond: cachedResponder(new ResponseCache(RESPONSE_CACHE_BYTES)) };
  await app.register(incidentRoutes, routeOptions);
  await app.register(userRoutes, routeOptions);
  await app.register(departmentAndLocationRoutes, routeOptions);

  // The API is read-only. A `read` key is refused by the scope check; a key whose scope allows
  // writes learns which methods exist. Refused in onRequest, so no request body is ever parsed.
  const refuseWrite = async (): Promise<never> => {
    throw ApiError.methodNotAllowed('GET, HEAD');
  };
  for (const url of PUBLIC_PATHS) {
    app.route({ method: [...WRITE_METHODS], url, onRequest: refuseWrite, handler: refuseWrite });
  }
}
