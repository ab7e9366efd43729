import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';
import { ApiError } from './errors.ts';
import { OAUTH_PATH } from './paths.ts';

/**
 * Operational endpoints outside the versioned API: Prometheus metrics at `/metrics` and the
 * OpenAPI 3.1 document of the public and wider APIs at `/openapi.json`, generated from the very
 * route schemas that serialize the responses, so the document cannot drift from the code.
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

interface DocumentedRoute {
  method: string;
  url: string;
  schema: Record<string, unknown>;
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

  const documented: DocumentedRoute[] = [];
  app.addHook('onRoute', (route) => {
    if (!route.url.startsWith('/api/') || route.schema?.response === undefined) return;
    for (const method of [route.method].flat()) {
      if (method !== 'HEAD')
        documented.push({ method, url: route.url, schema: route.schema as Record<string, unknown> });
    }
  });

  const metricsListener = app.config.metricsPort === null ? null : metricsOnlyApp(registry);
  app.decorate('metricsListener', metricsListener);
  if (metricsListener === null) {
    app.get('/metrics', metricsRoute(registry));
  } else {
    app.addHook('onClose', async () => {
      await metricsListener.close();
    });
  }

  let document: unknown;
  app.get('/openapi.json', async () => {
    document ??= openApiDocument(app.config.baseUrl, documented);
    return document;
  });
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

function openApiDocument(baseUrl: string, routes: DocumentedRoute[]): unknown {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const { method, url, schema } of routes) {
    const path = url.replace(/:(\w+)/g, '{$1}');
    const query = (
      schema.querystring as { properties?: Record<string, { description?: string }> } | undefined
    )?.properties;
    const parameters = [
      ...[...url.matchAll(/:(\w+)/g)].map((m) => ({
        name: m[1],
        in: 'path',
        required: true,
        schema: { type: 'string' },
      })),
      ...Object.entries(query ?? {}).map(([name, property]) => ({
        name,
        in: 'query',
        required: false,
        description: property.description,
        schema: { type: 'string' },
      })),
    ];
    const responses = Object.fromEntries(
      Object.entries(schema.response as Record<string, unknown>).map(([status, body]) => [
        status,
        { description: `HTTP ${status}`, content: { 'application/json': { schema: body } } },
      ]),
    );
    paths[path] ??= {};
    (paths[path] as Record<string, unknown>)[method.toLowerCase()] = {
      summary: schema.summary,
      security: [{ [url.startsWith('/api/v1/public/') ? 'apiKey' : 'oauth2']: [] }],
      ...(parameters.length > 0 ? { parameters } : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Safety Incident API', version: '1' },
    servers: [{ url: baseUrl }],
    components: {
      securitySchemes: {
        apiKey: {
          type: 'http',
          scheme: 'bearer',
          description: 'API key: svc_ followed by 40 lowercase hex characters',
        },
        oauth2: {
          type: 'openIdConnect',
          openIdConnectUrl: `${baseUrl}${OAUTH_PATH}/.well-known/openid-configuration`,
        },
      },
    },
    paths,
  };
}
