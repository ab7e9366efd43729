import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { refusalReason } from '../../admin/access.ts';
import { CSRF_FIELD, csrfTokenMatches } from '../../admin/csrf.ts';
import { formField } from '../../lib/form-field.ts';
import { type AdminSession, endSession, loadSession, takeFlash } from '../../admin/sessions.ts';
import { layout, type Page, type SignedIn } from '../../admin/views/layout.ts';
import { csrfFailurePage, refusalPage } from '../../admin/views/message-page.ts';
import { SIGN_IN_PATH } from '../../paths.ts';
import { endpointAlerts } from '../../services/mail-service.ts';
import { sendPage } from './responses.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The signed-in Super Admin's session; set on every route of the signed-in area. */
    adminSession: AdminSession;
  }
}

export function signedInAs(session: AdminSession): SignedIn {
  return { principal: session.principal, csrfToken: session.csrfToken, alerts: session.alerts ?? [] };
}

/** Renders a page of the signed-in area, with the one-time flash that was waiting for it. */
export async function sendSignedInPage(
  request: FastifyRequest,
  reply: FastifyReply,
  page: Page,
): Promise<FastifyReply> {
  const flash = await takeFlash(request, request.adminSession);
  return sendPage(reply, 200, layout({ ...page, flash }));
}

/**
 * The pages behind sign-in (Settings > Integrations: API keys, OAuth clients and webhooks). Every request
 * re-checks the session and the person behind it; every POST must carry the session's CSRF token.
 */
export function signedInArea(...areas: ((app: FastifyInstance) => Promise<void>)[]) {
  return async (app: FastifyInstance): Promise<void> => {
    app.decorateRequest('adminSession', null as never);

    app.addHook('preHandler', async (request, reply) => {
      const session = await loadSession(request);
      if (request.method === 'POST') {
        if (session === null || !csrfTokenMatches(session.csrfToken, formField(request.body, CSRF_FIELD))) {
          return sendPage(reply, 403, csrfFailurePage());
        }
      } else if (session === null) {
        return reply.redirect(SIGN_IN_PATH, 303);
      }
      const reason = refusalReason(session.principal);
      if (reason !== null) {
        await endSession(request, reply, session);
        return sendPage(reply, 403, refusalPage(reason));
      }
      const alerts = await endpointAlerts(request.server.db, session.principal.accountId, new Date());
      request.adminSession = { ...session, alerts };
    });

    for (const area of areas) await app.register(area);
  };
}
