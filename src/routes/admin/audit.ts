import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { auditPage } from '../../admin/views/audit.ts';
import { layout } from '../../admin/views/layout.ts';
import { formField } from '../../lib/form-field.ts';
import { InputError } from '../../errors.ts';
import { type AuditQuery, auditService } from '../../services/audit-service.ts';
import { sendPage } from './responses.ts';
import { sendSignedInPage, signedInAs } from './signed-in.ts';

/** The parameters of the audit page and its CSV. */
const AUDIT_PARAMETERS = [
  'actor',
  'subject_type',
  'subject_id',
  'action',
  'from',
  'to',
  'before',
] as const satisfies readonly (keyof AuditQuery)[];

/** The query's filters; a parameter given twice (or empty) is left out like a form field, so it means no filter. */
function auditQueryOf(query: unknown): AuditQuery {
  const parsed: AuditQuery = {};
  for (const name of AUDIT_PARAMETERS) {
    const value = formField(query, name);
    if (value !== '') parsed[name] = value;
  }
  return parsed;
}

/** The account's audit trail, filtered by GET parameters, and its CSV download; in the signed-in area. */
export async function adminAuditRoutes(app: FastifyInstance): Promise<void> {
  app.get('/settings/integrations/audit', async (request, reply) => {
    const session = request.adminSession;
    const signedIn = signedInAs(session);
    const query = auditQueryOf(request.query);
    try {
      const page = await auditService.page(request.server.db, session.principal.accountId, query);
      return sendSignedInPage(request, reply, auditPage({ signedIn, query, page }));
    } catch (error) {
      if (!(error instanceof InputError)) throw error;
      const page = auditPage({ signedIn, query, page: null, error: `${error.message}.` });
      return sendPage(reply, 400, layout(page));
    }
  });

  app.get('/settings/integrations/audit.csv', async (request, reply) => {
    const session = request.adminSession;
    try {
      const lines = auditService.csv(
        request.server.db,
        session.principal.accountId,
        auditQueryOf(request.query),
      );
      return reply
        .header('content-type', 'text/csv; charset=utf-8')
        .header('content-disposition', 'attachment; filename="audit-trail.csv"')
        .send(Readable.from(lines));
    } catch (error) {
      if (!(error instanceof InputError)) throw error;
      return reply.code(400).type('text/plain; charset=utf-8').send(`${error.message}\n`);
    }
  });
}
