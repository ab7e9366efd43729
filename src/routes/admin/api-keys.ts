import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { formField } from '../../admin/forms.ts';
import { type AdminSession, setFlash } from '../../admin/sessions.ts';
import { apiKeyPage, integrationsPage, keyPath, revokeConfirmationPage } from '../../admin/views/api-keys.ts';
import { messagePage } from '../../admin/views/message-page.ts';
import { oauthClientsSection } from '../../admin/views/oauth-clients-section.ts';
import { apiKeyRepository } from '../../db/repositories/api-keys.ts';
import { userRepository } from '../../db/repositories/users.ts';
import type { Database } from '../../db/schema.ts';
import { InputError } from '../../errors.ts';
import { INTEGRATIONS_PATH } from '../../paths.ts';
import { oauthClientService } from '../../services/oauth-client-service.ts';
import { type ApiKeyView, apiKeyService, toView } from '../../services/api-key-service.ts';
import { sendPage } from './responses.ts';
import { sendSignedInPage, signedInAs } from './signed-in.ts';

const AUDIT_TRAIL_LENGTH = 100;

type KeyParams = { Params: { id: string } };

async function userNames(db: Kysely<Database>, accountId: string, actors: (string | null)[]) {
  const ids = [...new Set(actors.filter((actor): actor is string => actor !== null && actor !== 'cli'))];
  const users = await userRepository.findNamesByIds(db, accountId, ids);
  return new Map(users.map((user) => [user.id, user.name]));
}

/** The key if it belongs to the account; another account's key is as absent as a missing one. */
async function ownKey(db: Kysely<Database>, keyId: string, accountId: string): Promise<ApiKeyView | null> {
  const row = await apiKeyRepository.findById(db, keyId);
  return row === undefined || row.account_id !== accountId ? null : toView(row);
}

function notFoundPage(session: AdminSession): string {
  return messagePage({
    title: 'API key not found',
    message: 'This account has no API key with that id.',
    next: { href: INTEGRATIONS_PATH, label: 'Back to Integrations' },
    signedIn: signedInAs(session),
  });
}

interface KeyAction {
  run(
    db: Kysely<Database>,
    keyId: string,
    body: unknown,
    actor: string,
    accountId: string,
  ): Promise<ApiKeyView>;
  done(key: ApiKeyView): string;
}

const KEY_ACTIONS: Record<string, KeyAction> = {
  rename: {
    run: (db, keyId, body, actor, accountId) =>
      apiKeyService.rename(db, keyId, formField(body, 'name'), actor, accountId),
    done: (key) => `Key renamed to “${key.name}”.`,
  },
  scope: {
    run: (db, keyId, body, actor, accountId) =>
      apiKeyService.setScope(db, keyId, formField(body, 'scope'), actor, accountId),
    done: (key) => `Scope of “${key.name}” changed to ${key.scope}.`,
  },
  disable: {
    run: (db, keyId, _body, actor, accountId) => apiKeyService.disable(db, keyId, actor, accountId),
    done: (key) => `Key “${key.name}” disabled: requests with it are refused until it is enabled.`,
  },
  enable: {
    run: (db, keyId, _body, actor, accountId) => apiKeyService.enable(db, keyId, actor, accountId),
    done: (key) => `Key “${key.name}” enabled.`,
  },
  revoke: {
    run: (db, keyId, _body, actor, accountId) => apiKeyService.revoke(db, keyId, actor, accountId),
    done: (key) => `Key “${key.name}” revoked permanently.`,
  },
};

/** Settings > Integrations and the API key pages; registered inside the signed-in area. */
export async function adminApiKeyRoutes(app: FastifyInstance): Promise<void> {
  app.get('/settings', async (_request, reply) => reply.redirect(INTEGRATIONS_PATH, 303));

  app.get('/settings/integrations', async (request, reply) => {
    const session = request.adminSession;
    const { db } = request.server;
    const accountId = session.principal.accountId;
    const now = new Date();
    const [keys, events, clients] = await Promise.all([
      apiKeyService.list(db, accountId, now),
      apiKeyRepository.listEvents(db, accountId, AUDIT_TRAIL_LENGTH),
      oauthClientService.list(db, accountId),
    ]);
    const names = await userNames(db, accountId, [
      ...keys.map((key) => key.created_by),
      ...events.map((event) => event.actor),
    ]);
    return sendSignedInPage(
      request,
      reply,
      integrationsPage({
        signedIn: signedInAs(session),
        keys,
        events,
        userNames: names,
        oauthClients: oauthClientsSection({ clients, csrfToken: session.csrfToken }),
        now,
      }),
    );
  });

  app.post('/settings/integrations/api-keys', async (request, reply) => {
    const session = request.adminSession;
    try {
      const { key, rawKey } = await apiKeyService.create(request.server.db, {
        accountId: session.principal.accountId,
        name: formField(request.body, 'name'),
        scope: formField(request.body, 'scope') || undefined,
        expiresAt: formField(request.body, 'expires_at') || null,
        actor: session.principal.userId,
      });
      await setFlash(request, session, {
        kind: 'success',
        message: `API key “${key.name}” created`,
        values: [{ id: 'new-key-value', label: 'New API key', value: rawKey }],
        secret: { noun: 'key', ifLost: 'only revoked and replaced' },
      });
    } catch (error) {
      if (!(error instanceof InputError)) throw error;
      await setFlash(request, session, {
        kind: 'error',
        message: `The key was not created: ${error.message}.`,
      });
    }
    // Redirecting means a reload never creates a second key, and the raw key never sits in a URL.
    return reply.redirect(INTEGRATIONS_PATH, 303);
  });

  app.get<KeyParams>('/settings/integrations/api-keys/:id', async (request, reply) => {
    const session = request.adminSession;
    const { db } = request.server;
    const key = await ownKey(db, request.params.id, session.principal.accountId);
    if (key === null) return sendPage(reply, 404, notFoundPage(session));
    const names = await userNames(db, session.principal.accountId, [key.created_by]);
    return sendSignedInPage(
      request,
      reply,
      apiKeyPage({ signedIn: signedInAs(session), key, userNames: names, now: new Date() }),
    );
  });

  app.get<KeyParams>('/settings/integrations/api-keys/:id/revoke', async (request, reply) => {
    const session = request.adminSession;
    const key = await ownKey(request.server.db, request.params.id, session.principal.accountId);
    if (key === null) return sendPage(reply, 404, notFoundPage(session));
    return sendSignedInPage(request, reply, revokeConfirmationPage({ signedIn: signedInAs(session), key }));
  });

  for (const [name, action] of Object.entries(KEY_ACTIONS)) {
    app.post<KeyParams>(`/settings/integrations/api-keys/:id/${name}`, async (request, reply) => {
      const session = request.adminSession;
      const { db } = request.server;
      const { accountId, userId } = session.principal;
      const keyId = request.params.id;
      try {
        const key = await action.run(db, keyId, request.body, userId, accountId);
        await setFlash(request, session, { kind: 'success', message: action.done(key) });
      } catch (error) {
        if (!(error instanceof InputError)) throw error;
        await setFlash(request, session, {
          kind: 'error',
          message: `Nothing was changed: ${error.message}.`,
        });
        if ((await ownKey(db, keyId, accountId)) === null) return reply.redirect(INTEGRATIONS_PATH, 303);
      }
      return reply.redirect(keyPath(keyId), 303);
    });
  }
}
