import type { FastifyInstance } from 'fastify';
import { DOCS_PAGE_HEADERS, docsPage } from './docs-page.ts';
import { acceptsGzip, docsScript } from './docs-script.ts';
import { openApiDocument, type RegisteredRoute } from './document.ts';

/** The script's URL changes with its content, so it may be kept as long as caches keep anything. */
const DOCS_SCRIPT_HEADERS = {
  'cache-control': 'public, max-age=31536000, immutable',
  'x-content-type-options': 'nosniff',
  vary: 'accept-encoding',
};

/**
 * `/openapi.json` and its reference page `/docs` (with the page's script under `/docs/`), outside
 * the versioned API: no credential, not counted. Must be registered before any route: it watches
 * every route as it is added, and builds the document on the first request, once every route is
 * there.
 */
export function registerApiDocs(app: FastifyInstance): void {
  const routes: RegisteredRoute[] = [];
  // The options object itself: a surface's own onRoute hooks may still complete it.
  app.addHook('onRoute', (route) => {
    routes.push(route);
  });

  let document: Record<string, unknown> | undefined;
  let page: string | undefined;
  const built = () => (document ??= openApiDocument(app.config.baseUrl, routes));

  app.get('/openapi.json', async () => built());
  app.get('/docs', async (_request, reply) => {
    const { name } = await docsScript();
    const { title } = built().info as { title: string };
    page ??= docsPage({ title, scriptPath: `/docs/${name}` });
    return reply.headers(DOCS_PAGE_HEADERS).type('text/html; charset=utf-8').send(page);
  });
  app.get<{ Params: { file: string } }>('/docs/:file', async (request, reply) => {
    const script = await docsScript();
    if (request.params.file !== script.name) return reply.callNotFound();
    reply.headers(DOCS_SCRIPT_HEADERS).type('text/javascript; charset=utf-8');
    if (!acceptsGzip(request.headers['accept-encoding'])) return reply.send(script.body);
    return reply.header('content-encoding', 'gzip').send(await script.gzipped);
  });
}
