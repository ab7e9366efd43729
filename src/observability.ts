import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';
import { ApiError } from './errors.ts';
import { registerApiDocs } from './openapi/routes.ts';

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

interface RouteSeries {
  duration: Histogram.Internal<'method' | 'route'>;
  byStatus: Map<number, Counter.Internal>;
}

/** Must run before any route is registered: it watches every route as it is added. */
export function registerObservability(app: FastifyInstance): void {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  registry.registerMetric(app.rateLimiter.fallbackCounter);
  const requests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP responses sent, by method, route pattern and status code',
    labelNames: ['method', 'route', 'status_code'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time from request to response, by route pattern',
    labelNames: ['method', 'route'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });

  // Label children, made once per method, route and status: prom-client hashes a label object on
  // every plain inc()/observe(), a child only on creation. The route pattern, never the raw URL,
  // keeps the label set (and so this map) bounded.
  const series = new Map<string, RouteSeries>();
  // Synchronous (callback style): an async hook would cost a promise and a tick on every response.
  app.addHook('onResponse', (request, reply, done) => {
    const method = request.method;
    const route = request.routeOptions.url ?? 'unmatched';
    const name = `${method} ${route}`;
    let entry = series.get(name);
    if (entry === undefined) {
      entry = { duration: duration.labels(method, route), byStatus: new Map() };
      series.set(name, entry);
    }
    const status = reply.statusCode;
    let counter = entry.byStatus.get(status);
    if (counter === undefined) {
      counter = requests.labels(method, route, String(status));
      entry.byStatus.set(status, counter);
    }
    counter.inc();
    entry.duration.observe(reply.elapsedTime / 1000);
    done();
  });

  registerApiDocs(app);

  const metricsListener = app.config.metricsPort === null ? null : metricsOnlyApp(registry);
  app.decorate('metricsListener', metricsListener);
  if (metricsListener === null) {
    app.get('/metrics', metricsRoute(registry));
  } else {
    app.addHook('onClose', async () => {
      await metricsListener.close();
    });
  }
}

function metricsRoute(registry: Registry) {
  return async (_request: unknown, reply: FastifyReply) => {
    reply.type(registry.contentType);
    return registry.metrics();
  };
}

/**
 * `/metrics` alone, for an address the public cannot reach: the counts tell how busy the service
 * is and which routes exist. Its own requests are neither logged nor counted.
 */
function metricsOnlyApp(registry: Registry): FastifyInstance {
  // A scraper's kept-alive connection must not hold up the process's shutdown.
  const metrics = Fastify({ logger: false, forceCloseConnections: true });
  metrics.get('/metrics', metricsRoute(registry));
  metrics.setNotFoundHandler((_request, reply) => reply.code(404).send(ApiError.notFound().body));
  return metrics;
}
