import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Redis } from 'ioredis';
import { healthRepository } from '../db/repositories/health.ts';

/**
 * Probes for orchestrators and load balancers, outside the versioned API: no key, no rate limit.
 * `/healthz` says the process is up and answering; `/readyz` says it can serve requests, which
 * needs the database. Redis is reported but never makes the instance unready: without it rate
 * limits are counted per instance, and requests are still answered.
 */

type RedisState = 'up' | 'down' | 'not configured';

async function redisState(redis: Redis | null): Promise<RedisState> {
  if (redis === null) return 'not configured';
  try {
    // The connection's own command timeout (about 200 ms) bounds a Redis that does not answer.
    await redis.ping();
    return 'up';
  } catch {
    return 'down';
  }
}

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
    const [database, redis] = await Promise.all([
      healthRepository.ping(app.db).then(
        () => 'up' as const,
        () => 'down' as const,
      ),
      redisState(app.redis),
    ]);
    const ready = database === 'up';
    return noStore(reply)
      .code(ready ? 200 : 503)
      .send({ status: ready ? 'ready' : 'unavailable', database, redis });
  });
}
