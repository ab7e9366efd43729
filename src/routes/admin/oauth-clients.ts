import type { FastifyInstance } from 'fastify';
import { formField } from '../../admin/forms.ts';
import { type Flash, setFlash } from '../../admin/sessions.ts';
import { messagePage } from '../../admin/views/message-page.ts';
import { CLIENT_TYPES, deleteConfirmationPage } from '../../admin/views/oauth-clients-section.ts';
import { InputError } from '../../errors.ts';
import { INTEGRATIONS_PATH } from '../../paths.ts';
import { type OauthClientView, oauthClientService } from '../../services/oauth-client-service.ts';
import { sendPage } from './responses.ts';
import { sendSignedInPage, signedInAs } from './signed-in.ts';

type ClientParams = { Params: { id: string } };

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
      ifLost: 'only replaced by deleting the client and registering it again',
    },
  };
}

/** Registering and deleting the account's OAuth clients; registered inside the signed-in area. */
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

  app.get<ClientParams>('/settings/integrations/oauth-clients/:id/delete', async (request, reply) => {
    const session = request.adminSession;
    const client = await oauthClientService.findOwn(
      request.server.db,
      request.params.id,
      session.principal.accountId,
    );
    if (client === null) {
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
    return sendSignedInPage(
      request,
      reply,
      deleteConfirmationPage({ signedIn: signedInAs(session), client }),
    );
  });

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
