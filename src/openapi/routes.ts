import type { FastifyInstance } from 'fastify';
import { docsPage } from './docs-page.ts';
import { openApiDocument, type RegisteredRoute } from './document.ts';

// The page loads only the product's stylesheet: no script at all, no framing, no forms.
const DOCS_PAGE_HEADERS = {
  'content-security-policy':
    "default-src 'none'; style-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
};

/**
 * `/openapi.json` and `/docs`, outside the versioned API: no credential, not counted. Must be
 * registered before any route: it watches every route as it is added, and builds the document on
 * the first request, once every route is there.
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
    page ??= docsPage(built());
    return reply.headers(DOCS_PAGE_HEADERS).type('text/html; charset=utf-8').send(page);
  });
}
