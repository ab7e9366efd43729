import type { FastifyInstance, FastifyReply } from 'fastify';
import { Type } from 'typebox';
import { LivenessSchema, ReadinessSchema } from '../schemas/health.ts';
import { TAGS } from '../schemas/openapi.ts';
import { ErrorSchema } from '../schemas/public.ts';
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
  const logLevel = 'warn' as const;

  app.get(
    '/healthz',
    {
      logLevel,
      schema: {
        operationId: 'checkLiveness',
        tags: [TAGS.health.name],
        summary: 'Whether the process is up',
        description: 'Answers as long as the process does; asks no store.',
        response: { 200: LivenessSchema },
      },
      config: { openapi: { responses: { 200: { examples: { up: { status: 'ok' } } } } } },
    },
    async (_request, reply) => {
      return noStore(reply).send({ status: 'ok' });
    },
  );

  app.get(
    '/readyz',
    {
      logLevel,
      schema: {
        operationId: 'checkReadiness',
        tags: [TAGS.health.name],
        summary: 'Whether the instance can serve requests',
        description:
          'Ready when the database answers within its deadline. Redis is reported, but never makes the instance unready.',
        // The 503 is declared below, not here: an error answer (this instance shutting down) goes
        // through the route's schema for its status too, and has the shape of `Error`.
        response: { 200: ReadinessSchema },
      },
      config: {
        openapi: {
          responses: {
            200: {
              description: 'Ready.',
              examples: { ready: { status: 'ready', database: 'up', redis: 'up' } },
            },
            503: {
              description:
                'Not ready: the database does not answer (`Readiness`), or this instance is shutting down (`Error`).',
              content: {
                'application/json': {
                  schema: Type.Union([ReadinessSchema, ErrorSchema]),
                  example: { status: 'unavailable', database: 'down', redis: 'up' },
                },
              },
            },
          },
        },
      },
    },
    async (_request, reply) => {
      const { ready, database, redis } = await healthService.readiness(app.db, app.redis);
      return noStore(reply)
        .code(ready ? 200 : 503)
        .send({ status: ready ? 'ready' : 'unavailable', database, redis });
    },
  );
}
