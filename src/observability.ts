import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { ApiError } from './errors.ts';
import { HttpMetrics } from './http-metrics.ts';
import { registerApiDocs } from './openapi/routes.ts';
import { activeTracing } from './telemetry/tracing.ts';

/**
 * Operational endpoints outside the versioned API: Prometheus metrics at `/metrics`, and the
 * OpenAPI 3.1 document of the public and wider APIs at `/openapi.json` with its HTML reference at
 * `/docs` (src/openapi/), generated from the very route schemas that serialize the responses, so
 * the document cannot drift from the code.
 */

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * The separate `/metrics` listener when METRICS_PORT is set (`server.ts` makes it listen; it
     * closes with the application), `null` when `/metrics` is served on the main port.
     */
    metricsListener: FastifyInstance | null;
  }
}

/** Must run before any route is registered: it watches every route as it is added. */
export function registerObservability(app: FastifyInstance): void {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  registry.registerMetric(app.rateLimiter.fallbackCounter);
  for (const metric of app.delivery.metrics.all()) registry.registerMetric(metric);
  const tracing = activeTracing();
  if (tracing !== null) registry.registerMetric(tracing.droppedSpans);
  const http = new HttpMetrics();
  // The responses counted here also tell webhook deliveries when to give way to requests.
  app.delivery.governor.yieldTo(() => http.responses);
  // Synchronous (callback style): an async hook would cost a promise and a tick on every response.
  app.addHook('onResponse', (request, reply, done) => {
    // The route pattern, never the raw URL, keeps the label set bounded.
    http.record(
      request.method,
      request.routeOptions.url ?? 'unmatched',
      reply.statusCode,
      reply.elapsedTime / 1000,
    );
    done();
  });

  registerApiDocs(app);

  const exposition = async () => `${await registry.metrics()}\n${http.text()}`;
  const metricsListener = app.config.metricsPort === null ? null : metricsOnlyApp(exposition);
  app.decorate('metricsListener', metricsListener);
  if (metricsListener === null) {
    app.get('/metrics', metricsRoute(exposition));
  } else {
    app.addHook('onClose', async () => {
      await metricsListener.close();
    });
  }
}

/** prom-client's series, then the HTTP ones (`HttpMetrics`), in Prometheus' text format. */
type Exposition = () => Promise<string>;

function metricsRoute(exposition: Exposition) {
  return async (_request: unknown, reply: FastifyReply) => {
    reply.type(Registry.PROMETHEUS_CONTENT_TYPE);
    return exposition();
  };
}

/**
 * `/metrics` alone, for an address the public cannot reach: the counts tell how busy the service
 * is and which routes exist. Its own requests are neither logged nor counted.
 */
function metricsOnlyApp(exposition: Exposition): FastifyInstance {
  // A scraper's kept-alive connection must not hold up the process's shutdown.
  const metrics = Fastify({ logger: false, forceCloseConnections: true });
  metrics.get('/metrics', metricsRoute(exposition));
  metrics.setNotFoundHandler((_request, reply) => reply.code(404).send(ApiError.notFound().body));
  return metrics;
}
