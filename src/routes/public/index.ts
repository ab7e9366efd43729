import type { FastifyInstance } from 'fastify';
import { authenticateApiKey } from '../../auth/api-keys.ts';
import { ApiError } from '../../errors.ts';
import { departmentAndLocationRoutes } from './departments-and-locations.ts';
import { incidentRoutes } from './incidents.ts';
import { userRoutes } from './users.ts';

const WRITE_METHODS = ['POST', 'PUT', 'PATCH', 'DELETE'] as const;
const PUBLIC_PATHS = ['/incidents', '/incidents/:id', '/users', '/departments', '/locations'];

/** Mounted at /api/v1/public. Every route here runs the API-key check first. */
export async function publicApiRoutes(app: FastifyInstance): Promise<void> {
  app.addHook('onRequest', authenticateApiKey);

  await app.register(incidentRoutes);
  await app.register(userRoutes);
  await app.register(departmentAndLocationRoutes);

  // The API is read-only. A `read` key is refused by the scope check; a key whose scope allows
  // writes learns which methods exist. Refused in onRequest, so no request body is ever parsed.
  const refuseWrite = async (): Promise<never> => {
    throw ApiError.methodNotAllowed('GET, HEAD');
  };
  for (const url of PUBLIC_PATHS) {
    app.route({ method: [...WRITE_METHODS], url, onRequest: refuseWrite, handler: refuseWrite });
  }
}
