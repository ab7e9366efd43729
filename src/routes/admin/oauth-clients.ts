import type { FastifyInstance, FastifyReply } from 'fastify';
import { formField } from '../../lib/form-field.ts';
import { type AdminSession, type Flash, setFlash } from '../../admin/sessions.ts';
import { messagePage } from '../../admin/views/message-page.ts';
import {
  CLIENT_TYPES,
  clientPage,
  clientPath,
  deleteConfirmationPage,
} from '../../admin/views/oauth-clients-section.ts';
import { InputError } from '../../errors.ts';
import { INTEGRATIONS_PATH } from '../../paths.ts';
import { type OauthClientView, oauthClientService } from '../../services/oauth-client-service.ts';
import { sendPage } from './responses.ts';
import { sendSignedInPage, signedInAs } from './signed-in.ts';

type ClientParams = { Params: { id: string } };
type GrantParams = { Params: { id: string; grantId: string } };

function sendClientNotFound(reply: FastifyReply, session: AdminSession): FastifyReply {
  return sendPage(
    reply,
    404,
    messagePage({
      title: 'OAuth client not found',
      message: 'This account has no OAuth client with that id.',
      next: { href: `${INTEGRATIONS_PATH}#oauth-clients`, label: 'Back to Integrations' },
      signedIn: signedInAs(session),
    }),
  );
}

/** The textarea holds one redirect URI per line; blank lines and surrounding spaces are not URIs. */
function redirectUrisOfForm(body: unknown): string[] {
  return formField(body, 'redirect_uris')
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '');
}

function isPublicOfForm(body: unknown): boolean {
  const type = formField(body, 'type');
  if (!Object.hasOwn(CLIENT_TYPES, type))
    throw new InputError('choose a client type: confidential or public');
  return type === 'public';
}

function createdFlash(client: OauthClientView, clientSecret: string | null): Flash {
  const clientId = { id: 'new-client-id', label: 'Client ID', value: client.client_id };
  if (clientSecret === null) {
    return {
      kind: 'success',
      message: `Public OAuth client “${client.name}” registered: it has no secret and signs people in with PKCE`,
      values: [clientId],
    };
  }
  return {
    kind: 'success',
    message: `OAuth client “${client.name}” registered`,
    values: [clientId, { id: 'new-client-secret', label: 'Client secret', value: clientSecret }],
    secret: {
      noun: 'client secret',
      ifLost: "replaced by rotating it on the client's page",
    },
  };
}

/**
 * Registering and deleting the account's OAuth clients, rotating a client's secret and revoking
 * the grants of its users; registered inside the signed-in area (Super Admins, CSRF on every post).
 */
export async function adminOauthClientRoutes(app: FastifyInstance): Promise<void> {
  app.post('/settings/integrations/oauth-clients', async (request, reply) => {
    const session = request.adminSession;
    try {
      const { client, clientSecret } = await oauthClientService.create(request.server.db, {
        accountId: session.principal.accountId,
        name: formField(request.body, 'name'),
        redirectUris: redirectUrisOfForm(request.body),
        isPublic: isPublicOfForm(request.body),
      });
      await setFlash(request, session, createdFlash(client, clientSecret));
    } catch (error) {
      if (!(error instanceof InputError)) throw error;
      await setFlash(request, session, {
        kind: 'error',
        message: `The OAuth client was not registered: ${error.message}.`,
      });
    }
    // As for API keys: a reload cannot register a second client, and the secret is never in a URL.
    return reply.redirect(INTEGRATIONS_PATH, 303);
  });

  app.get<ClientParams>('/settings/integrations/oauth-clients/:id', async (request, reply) => {
    const session = request.adminSession;
    const { db } = request.server;
    const { accountId } = session.principal;
    const client = await oauthClientService.findOwn(db, request.params.id, accountId);
    if (client === null) return sendClientNotFound(reply, session);
    const grants = await oauthClientService.listGrants(db, client.client_id, accountId);
    return sendSignedInPage(request, reply, clientPage({ signedIn: signedInAs(session), client, grants }));
  });

  app.get<ClientParams>('/settings/integrations/oauth-clients/:id/delete', async (request, reply) => {
    const session = request.adminSession;
    const client = await oauthClientService.findOwn(
      request.server.db,
      request.params.id,
      session.principal.accountId,
    );
    if (client === null) return sendClientNotFound(reply, session);
    return sendSignedInPage(
      request,
      reply,
      deleteConfirmationPage({ signedIn: signedInAs(session), client }),
    );
  });

  app.post<ClientParams>('/settings/integrations/oauth-clients/:id/rotate-secret', async (request, reply) => {
    const session = request.adminSession;
    const { accountId, userId } = session.principal;
    const clientId = request.params.id;
    try {
      const rotated = await oauthClientService.rotateSecret(
        request.server.db,
        clientId,
        formField(request.body, 'overlap'),
        userId,
        accountId,
      );
      await setFlash(request, session, {
        kind: 'success',
        message: 'New client secret created',
        values: [{ id: 'new-client-secret', label: 'Client secret', value: rotated.client_secret }],
        secret: { noun: 'client secret', ifLost: 'only replaced by rotating it again' },
        note: `The old secret works until ${rotated.previous_secret_expires_at}.`,
      });
    } catch (error) {
      if (!(error instanceof InputError)) throw error;
      await setFlash(request, session, { kind: 'error', message: `Nothing was changed: ${error.message}.` });
    }
    // Redirected so that a reload cannot rotate again, and the secret is never in a URL.
    return reply.redirect(clientPath(clientId), 303);
  });

  app.post<GrantParams>(
    '/settings/integrations/oauth-clients/:id/grants/:grantId/revoke',
    async (request, reply) => {
      const session = request.adminSession;
      const { accountId, userId } = session.principal;
      const { id: clientId, grantId } = request.params;
      try {
        await oauthClientService.revokeGrant(request.server.db, clientId, grantId, userId, accountId);
        await setFlash(request, session, {
          kind: 'success',
          message: 'Grant revoked: its refresh and access tokens no longer work.',
        });
      } catch (error) {
        if (!(error instanceof InputError)) throw error;
        await setFlash(request, session, {
          kind: 'error',
          message: `Nothing was changed: ${error.message}.`,
        });
      }
      return reply.redirect(clientPath(clientId), 303);
    },
  );

  app.post<ClientParams>('/settings/integrations/oauth-clients/:id/delete', async (request, reply) => {
    const session = request.adminSession;
    const { db } = request.server;
    const { accountId } = session.principal;
    const clientId = request.params.id;
    const client = await oauthClientService.findOwn(db, clientId, accountId);
    try {
      // Refuses a client of another account exactly like a missing one, so `client` is set after it.
      await oauthClientService.delete(db, clientId, accountId);
      await setFlash(request, session, {
        kind: 'success',
        message: `OAuth client “${client?.name ?? clientId}” deleted: its tokens stop working at their next use.`,
      });
    } catch (error) {
      if (!(error instanceof InputError)) throw error;
      await setFlash(request, session, { kind: 'error', message: `Nothing was changed: ${error.message}.` });
    }
    return reply.redirect(INTEGRATIONS_PATH, 303);
  });
}
