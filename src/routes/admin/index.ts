import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import type { FastifyError, FastifyInstance } from 'fastify';
import { storeOutage } from '../../errors.ts';
import { ADMIN_PATH, INTEGRATIONS_PATH } from '../../paths.ts';
import { messagePage } from '../../admin/views/message-page.ts';
import { adminApiKeyRoutes } from './api-keys.ts';
import { adminAssetRoutes } from './assets.ts';
import { adminAuditRoutes } from './audit.ts';
import { adminOauthClientRoutes } from './oauth-clients.ts';
import { sendPage } from './responses.ts';
import { adminSignInRoutes } from './sign-in.ts';
import { signedInArea } from './signed-in.ts';
import { adminWebhookRoutes } from './webhooks.ts';

// Pages load only the panel's own files: no inline script or style, no framing, and forms post
// only back to the panel. Pages may show a raw key, a client secret or a webhook signing secret once,
// so no cache may keep them.
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store',
};

/**
 * The admin panel, mounted at /admin: server-rendered pages for Super Admins. Cookies and form
 * bodies are parsed only inside this plugin, so the public API stays untouched by them.
 */
export async function adminRoutes(app: FastifyInstance): Promise<void> {
  await app.register(cookie);
  await app.register(formbody);

  app.addHook('onRequest', async (_request, reply) => {
    reply.headers(SECURITY_HEADERS);
  });

  // Every change the panel makes (keys, OAuth clients) is a form post, committed by the time its
  // answer is sent: bumping here, before it goes out, lets every instance see the change at its
  // next request. Posts that change nothing (sign-in, a refused form) cost each instance one read.
  // If Redis does not take the bump, it is tried again until it does.
  app.addHook('onSend', async (request, _reply, payload) => {
    const generation = request.server.sharedGeneration;
    if (request.method !== 'POST' || generation === null) return payload;
    const log = request.server.log;
    await generation.bumpOrKeepTrying((failure) => {
      if (failure === null) log.info("Redis took the cache bump: every instance sees the panel's changes");
      else
        log.error(
          { err: failure },
          'the change is saved, but Redis did not take the cache bump: instances that saw no outage serve the old key rows until it lands; trying again until it does',
        );
    });
    return payload;
  });

  app.setErrorHandler((error: FastifyError, request, reply) => {
    // Logged once per outage by the store monitor, not per request.
    const outage = storeOutage(error);
    if (outage !== null) {
      reply.headers(outage.headers);
      return sendPage(
        reply,
        outage.statusCode,
        messagePage({
          title: 'Temporarily unavailable',
          message: 'The panel cannot reach its database right now. Please try again in a few seconds.',
        }),
      );
    }
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      return sendPage(reply, status, messagePage({ title: 'Request not accepted', message: error.message }));
    }
    request.log.error({ err: error }, 'unhandled admin panel error');
    return sendPage(
      reply,
      500,
      messagePage({
        title: 'Something went wrong',
        message: 'The panel could not complete this request. The error has been logged.',
        next: { href: ADMIN_PATH, label: 'Back to the admin panel' },
      }),
    );
  });

  app.setNotFoundHandler((_request, reply) =>
    sendPage(
      reply,
      404,
      messagePage({
        title: 'Page not found',
        message: 'There is no admin panel page at this address.',
        next: { href: ADMIN_PATH, label: 'Back to the admin panel' },
      }),
    ),
  );

  app.get('/', async (_request, reply) => reply.redirect(INTEGRATIONS_PATH, 303));

  await app.register(adminAssetRoutes);
  await app.register(adminSignInRoutes);
  await app.register(
    signedInArea(adminApiKeyRoutes, adminOauthClientRoutes, adminWebhookRoutes, adminAuditRoutes),
  );
}
