import type { FastifyInstance, FastifyReply } from 'fastify';
import { healthService } from '../services/health-service.ts';

/**
 * Probes for orchestrators and load balancers, outside the versioned API: no key, no rate limit.
 * `/healthz` says the process is up and answering; `/readyz` says it can serve requests, which
 * needs the database. Redis is reported but never makes the instance unready: without it rate
 * limits are counted per instance, and requests are still answered.
 */

function noStore(reply: FastifyReply): FastifyReply {
  // A cached "ready" from a moment ago says nothing about now.
  return reply.header('cache-control', 'no-store');
}

export async function healthRoutes(app: FastifyInstance): Promise<void> {
  // A probe every few seconds would otherwise fill the log with two lines each.
  const probeRoute = { logLevel: 'warn' as const };

  app.get('/healthz', probeRoute, async (_request, reply) => {
    return noStore(reply).send({ status: 'ok' });
  });

  app.get('/readyz', probeRoute, async (_request, reply) => {
    const { ready, database, redis } = await healthService.readiness(app.db, app.redis);
    return noStore(reply)
      .code(ready ? 200 : 503)
      .send({ status: ready ? 'ready' : 'unavailable', database, redis });
  });
}
