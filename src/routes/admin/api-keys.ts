import type { FastifyInstance } from 'fastify';
import { formField } from '../../lib/form-field.ts';
import { type AdminSession, setFlash } from '../../admin/sessions.ts';
import { apiKeyPage, integrationsPage, keyPath, revokeConfirmationPage } from '../../admin/views/api-keys.ts';
import { messagePage } from '../../admin/views/message-page.ts';
import { oauthClientsSection } from '../../admin/views/oauth-clients-section.ts';
import { InputError } from '../../errors.ts';
import { INTEGRATIONS_PATH } from '../../paths.ts';
import { oauthClientService } from '../../services/oauth-client-service.ts';
import { type ApiKeyView, apiKeyService, parseKeyListRequest } from '../../services/api-key-service.ts';
import { keyUsageService } from '../../services/key-usage-service.ts';
import { userService } from '../../services/user-service.ts';
import { sendPage } from './responses.ts';
import { sendSignedInPage, signedInAs } from './signed-in.ts';

const AUDIT_TRAIL_LENGTH = 100;

type KeyParams = { Params: { id: string } };
type Db = FastifyInstance['db'];

/** Names of the users among the actors of keys and events (the others are `cli` or no one). */
async function userNames(db: Db, accountId: string, actors: (string | null)[]) {
  const ids = [...new Set(actors.filter((actor): actor is string => actor !== null && actor !== 'cli'))];
  return userService.namesByIds(db, accountId, ids);
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
  run(db: Db, keyId: string, body: unknown, actor: string, accountId: string): Promise<ApiKeyView>;
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
    // A parameter given twice (or not at all) is '' like a form field, so it means the default.
    const listRequest = parseKeyListRequest({
      q: formField(request.query, 'q'),
      state: formField(request.query, 'state'),
      sort: formField(request.query, 'sort'),
      page: formField(request.query, 'page'),
    });
    const [list, events, clients] = await Promise.all([
      apiKeyService.listPage(db, accountId, listRequest, now),
      apiKeyService.listEvents(db, accountId, AUDIT_TRAIL_LENGTH),
      oauthClientService.list(db, accountId),
    ]);
    const names = await userNames(db, accountId, [
      ...list.keys.map((key) => key.created_by),
      ...events.map((event) => event.actor),
    ]);
    const keyNames = await apiKeyService.namesByIds(
      db,
      accountId,
      events.map((event) => event.subject_id),
    );
    return sendSignedInPage(
      request,
      reply,
      integrationsPage({
        signedIn: signedInAs(session),
        list: { ...list, request: listRequest },
        keyNames,
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
    const key = await apiKeyService.findOwn(db, request.params.id, session.principal.accountId);
    if (key === null) return sendPage(reply, 404, notFoundPage(session));
    const accountId = session.principal.accountId;
    const now = new Date();
    const [names, related, usage] = await Promise.all([
      userNames(db, accountId, [key.created_by]),
      apiKeyService.namesByIds(
        db,
        accountId,
        [key.rolled_from, key.rolled_to].filter((id): id is string => id !== null),
      ),
      keyUsageService.summary(db, key.id, now),
    ]);
    return sendSignedInPage(
      request,
      reply,
      apiKeyPage({ signedIn: signedInAs(session), key, userNames: names, related, usage, now }),
    );
  });

  app.get<KeyParams>('/settings/integrations/api-keys/:id/revoke', async (request, reply) => {
    const session = request.adminSession;
    const key = await apiKeyService.findOwn(
      request.server.db,
      request.params.id,
      session.principal.accountId,
    );
    if (key === null) return sendPage(reply, 404, notFoundPage(session));
    return sendSignedInPage(request, reply, revokeConfirmationPage({ signedIn: signedInAs(session), key }));
  });

  app.post<KeyParams>('/settings/integrations/api-keys/:id/roll', async (request, reply) => {
    const session = request.adminSession;
    const { db } = request.server;
    const { accountId, userId } = session.principal;
    const keyId = request.params.id;
    try {
      const { key, rawKey, previous } = await apiKeyService.roll(
        db,
        keyId,
        formField(request.body, 'overlap'),
        userId,
        accountId,
      );
      await setFlash(request, session, {
        kind: 'success',
        message: `API key “${key.name}” created to replace “${previous.name}”`,
        values: [{ id: 'new-key-value', label: 'New API key', value: rawKey }],
        secret: { noun: 'key', ifLost: 'only revoked and replaced' },
        note: `The old key works until ${previous.expires_at ?? 'it is revoked'}: deploy the new one before then.`,
      });
      // The successor's page: the one that shows its raw value, once, and links back to the old key.
      return reply.redirect(keyPath(key.id), 303);
    } catch (error) {
      if (!(error instanceof InputError)) throw error;
      await setFlash(request, session, { kind: 'error', message: `Nothing was changed: ${error.message}.` });
      if ((await apiKeyService.findOwn(db, keyId, accountId)) === null)
        return reply.redirect(INTEGRATIONS_PATH, 303);
      return reply.redirect(keyPath(keyId), 303);
    }
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
        if ((await apiKeyService.findOwn(db, keyId, accountId)) === null)
          return reply.redirect(INTEGRATIONS_PATH, 303);
      }
      return reply.redirect(keyPath(keyId), 303);
    });
  }
}
