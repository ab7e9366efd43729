import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { formField } from '../../lib/form-field.ts';
import { type AdminSession, type Flash, setFlash } from '../../admin/sessions.ts';
import { messagePage } from '../../admin/views/message-page.ts';
import {
  attemptPage,
  deleteConfirmationPage,
  type EndpointWithAttempts,
  endpointPath,
  FROM_LATEST_CONFIRMED,
  type LogFilter,
  restartConfirmationPage,
  webhookPage,
  webhooksPage,
} from '../../admin/views/webhooks.ts';
import { InputError } from '../../errors.ts';
import { WEBHOOKS_PATH } from '../../paths.ts';
import { userService } from '../../services/user-service.ts';
import {
  type AttemptQuery,
  parseAttemptQuery,
  parseOverlapHours,
  type WebhookService,
} from '../../services/webhook-service.ts';
import { sendPage } from './responses.ts';
import { sendSignedInPage, signedInAs } from './signed-in.ts';

const HISTORY_LENGTH = 100;

type EndpointParams = { Params: { id: string } };
type EndpointPageRequest = { Params: { id: string }; Querystring: Record<string, unknown> };
type AttemptParams = { Params: { id: string; attemptId: string } };

/** One value of a query string: the first when repeated, '' when absent or not text. */
function queryValue(query: Record<string, unknown>, name: string): string {
  const value = query[name];
  const first = Array.isArray(value) ? value[0] : value;
  return typeof first === 'string' ? first : '';
}

/** The one-time display of a signing secret: after creation and after a rotation. */
function secretFlash(message: string, secret: string, note?: string): Flash {
  return {
    kind: 'success',
    message,
    values: [{ id: 'new-webhook-secret', label: 'Signing secret', value: secret }],
    secret: {
      noun: 'signing secret',
      kept: 'the service keeps it encrypted, only to sign, and never displays it',
      ifLost: 'only replaced by rotating it',
    },
    ...(note === undefined ? {} : { note }),
  };
}

/** The endpoint if it is this account's, or null: another account's is reported like a missing one. */
async function findOwn(
  webhooks: WebhookService,
  endpointId: string,
  accountId: string,
  query: AttemptQuery = {},
): Promise<EndpointWithAttempts | null> {
  try {
    return await webhooks.show(endpointId, accountId, query);
  } catch (error) {
    if (error instanceof InputError) return null;
    throw error;
  }
}

function notFound(reply: FastifyReply, session: AdminSession): FastifyReply {
  return sendPage(
    reply,
    404,
    messagePage({
      title: 'Webhook endpoint not found',
      message: 'This account has no webhook endpoint with that id.',
      next: { href: WEBHOOKS_PATH, label: 'Back to Webhooks' },
      signedIn: signedInAs(session),
    }),
  );
}

interface ActionContext {
  request: FastifyRequest<EndpointParams>;
  endpointId: string;
  accountId: string;
  actor: string;
}

/** Each action changes the endpoint through the service (which writes its audit event) and says what it did. */
type EndpointAction = (context: ActionContext) => Promise<Flash>;

const ENDPOINT_ACTIONS: Record<string, EndpointAction> = {
  async update({ request, endpointId, accountId, actor }) {
    await request.server.services.webhooks.update(endpointId, actor, {
      url: formField(request.body, 'url'),
      events: formField(request.body, 'events'),
      description: formField(request.body, 'description'),
      accountId,
    });
    return {
      kind: 'success',
      message:
        'Webhook endpoint saved: deliveries go on from the same position, to this URL and through these events, signed with the same secret.',
    };
  },

  async disable({ request, endpointId, accountId, actor }) {
    await request.server.services.webhooks.disable(endpointId, actor, { accountId });
    return {
      kind: 'success',
      message:
        'Webhook endpoint disabled: nothing is sent to it until it is enabled, and its position is kept.',
    };
  },

  async enable({ request, endpointId, accountId, actor }) {
    const fromLatest = formField(request.body, 'from_latest') === FROM_LATEST_CONFIRMED;
    if (!fromLatest) {
      // Said here in the panel's words; the service refuses it too, in the command line's.
      const endpoint = await request.server.services.webhooks.show(endpointId, accountId);
      if (endpoint.state === 'disabled' && endpoint.past_retention)
        throw new InputError(
          'its position is older than the changes feed keeps, so it can only restart from the latest change: use “Enable and restart from latest…” and confirm',
        );
    }
    await request.server.services.webhooks.enable(endpointId, actor, { accountId, fromLatest });
    return {
      kind: 'success',
      message: fromLatest
        ? 'Webhook endpoint enabled from the latest change: the changes made while it was stopped are not sent.'
        : 'Webhook endpoint enabled: deliveries resume after the last change it received.',
    };
  },

  async resend({ request, endpointId, accountId, actor }) {
    const cursor = formField(request.body, 'cursor').trim();
    if (cursor === '')
      throw new InputError('enter a cursor: an event’s data.cursor, a /changes cursor, or latest');
    const endpoint = await request.server.services.webhooks.resend(endpointId, cursor, actor, accountId);
    return {
      kind: 'success',
      message:
        endpoint.lag === 0
          ? 'Deliveries restart from the latest change: nothing is waiting to be sent.'
          : `Resending from that cursor: up to ${endpoint.lag} ${endpoint.lag === 1 ? 'change' : 'changes'} will be sent again, in order.`,
    };
  },

  async redeliver({ request, endpointId, accountId, actor }) {
    const result = await request.server.services.webhooks.redeliver(
      endpointId,
      formField(request.body, 'webhook_id'),
      actor,
      accountId,
    );
    if (result.status !== null && result.status >= 200 && result.status < 300) {
      return {
        kind: 'success',
        message: `Event ${result.webhook_id} redelivered: HTTP ${result.status} in ${result.durationMs} ms. The position did not move.`,
      };
    }
    return {
      kind: 'error',
      message: `Event ${result.webhook_id} was sent again and failed after ${result.durationMs} ms: ${result.error ?? 'no answer'}.`,
    };
  },

  async skip({ request, endpointId, accountId, actor }) {
    const { skipped } = await request.server.services.webhooks.skip(endpointId, actor, accountId);
    return {
      kind: 'success',
      message: `Skipped ${skipped.webhook_id} (${skipped.type} of ${skipped.record_id}, seq ${skipped.seq}): the next event is sent at once.`,
    };
  },

  async 'rotate-secret'({ request, endpointId, accountId, actor }) {
    const overlapHours = parseOverlapHours(formField(request.body, 'overlap_hours').trim());
    const rotated = await request.server.services.webhooks.rotateSecret(endpointId, actor, {
      overlapHours,
      accountId,
    });
    return secretFlash(
      'Signing secret rotated',
      rotated.secret,
      rotated.previous_secrets_expire_at.length === 0
        ? 'No earlier secret signs any more.'
        : `Earlier secrets also sign every message, each until its own expiry: ${rotated.previous_secrets_expire_at.join(', ')}.`,
    );
  },

  async test({ request, endpointId, accountId }) {
    const result = await request.server.services.webhooks.sendTest(endpointId, accountId);
    if (result.status !== null && result.status >= 200 && result.status < 300) {
      return {
        kind: 'success',
        message: `Test event ${result.webhook_id} delivered: HTTP ${result.status} in ${result.durationMs} ms.`,
      };
    }
    return {
      kind: 'error',
      message: `Test event ${result.webhook_id} failed after ${result.durationMs} ms: ${result.error ?? 'no answer'}.`,
    };
  },
};

/** Settings > Integrations > Webhooks; registered inside the signed-in area. */
export async function adminWebhookRoutes(app: FastifyInstance): Promise<void> {
  app.get('/settings/integrations/webhooks', async (request, reply) => {
    const session = request.adminSession;
    const endpoints = await request.server.services.webhooks.list(session.principal.accountId);
    return sendSignedInPage(request, reply, webhooksPage({ signedIn: signedInAs(session), endpoints }));
  });

  app.post('/settings/integrations/webhooks', async (request, reply) => {
    const session = request.adminSession;
    try {
      const { endpoint, secret } = await request.server.services.webhooks.create({
        accountId: session.principal.accountId,
        url: formField(request.body, 'url'),
        events: formField(request.body, 'events'),
        description: formField(request.body, 'description'),
        actor: session.principal.userId,
      });
      await setFlash(
        request,
        session,
        secretFlash(
          'Webhook endpoint added',
          secret,
          'Receivers verify each message with it (Standard Webhooks signatures). It receives the changes made from now on.',
        ),
      );
      // As for keys: a reload cannot add a second endpoint, and the secret is never in a URL.
      return reply.redirect(endpointPath(endpoint.id), 303);
    } catch (error) {
      if (!(error instanceof InputError)) throw error;
      await setFlash(request, session, {
        kind: 'error',
        message: `The endpoint was not added: ${error.message}.`,
      });
      return reply.redirect(WEBHOOKS_PATH, 303);
    }
  });

  app.get<EndpointPageRequest>('/settings/integrations/webhooks/:id', async (request, reply) => {
    const session = request.adminSession;
    const { db, services } = request.server;
    const { accountId } = session.principal;
    // The delivery log's filter; one the service refuses is said on the page, and not applied.
    const filter: LogFilter = {
      outcome: queryValue(request.query, 'outcome'),
      type: queryValue(request.query, 'type'),
      problem: null,
    };
    try {
      parseAttemptQuery(filter);
    } catch (error) {
      if (!(error instanceof InputError)) throw error;
      filter.problem = error.message;
    }
    const endpoint = await findOwn(
      services.webhooks,
      request.params.id,
      accountId,
      filter.problem === null ? filter : {},
    );
    if (endpoint === null) return notFound(reply, session);
    const stuck =
      endpoint.failing_since === null ? null : await services.webhooks.stuckEvent(endpoint.id, accountId);
    const history = await services.webhooks.history(endpoint.id, accountId, HISTORY_LENGTH);
    const actors = [endpoint.created_by, ...history.map((event) => event.actor)];
    const userIds = [
      ...new Set(actors.filter((actor) => actor !== null && actor !== 'cli' && actor !== 'system')),
    ];
    const userNames = await userService.namesByIds(db, accountId, userIds as string[]);
    return sendSignedInPage(
      request,
      reply,
      webhookPage({ signedIn: signedInAs(session), endpoint, history, userNames, stuck, filter }),
    );
  });

  app.get<AttemptParams>(
    '/settings/integrations/webhooks/:id/attempts/:attemptId',
    async (request, reply) => {
      const session = request.adminSession;
      const { webhooks } = request.server.services;
      const { accountId } = session.principal;
      const endpoint = await findOwn(webhooks, request.params.id, accountId, { limit: 1 });
      if (endpoint === null) return notFound(reply, session);
      let attempt;
      try {
        attempt = await webhooks.attempt(endpoint.id, request.params.attemptId, accountId);
      } catch (error) {
        if (!(error instanceof InputError)) throw error;
        return sendPage(
          reply,
          404,
          messagePage({
            title: 'Delivery attempt not found',
            message:
              'The delivery log of this endpoint has no such attempt: it keeps the last 1,000 attempts of the last 30 days.',
            next: { href: endpointPath(endpoint.id), label: 'Back to the endpoint' },
            signedIn: signedInAs(session),
          }),
        );
      }
      return sendSignedInPage(
        request,
        reply,
        attemptPage({ signedIn: signedInAs(session), endpoint, attempt }),
      );
    },
  );

  app.get<EndpointParams>('/settings/integrations/webhooks/:id/delete', async (request, reply) => {
    const session = request.adminSession;
    const endpoint = await findOwn(
      request.server.services.webhooks,
      request.params.id,
      session.principal.accountId,
    );
    if (endpoint === null) return notFound(reply, session);
    return sendSignedInPage(
      request,
      reply,
      deleteConfirmationPage({ signedIn: signedInAs(session), endpoint }),
    );
  });

  // Only an endpoint stopped past the feed's retention needs this confirmation; any other goes back
  // to its page, where enabling is one button.
  app.get<EndpointParams>('/settings/integrations/webhooks/:id/enable', async (request, reply) => {
    const session = request.adminSession;
    const endpoint = await findOwn(
      request.server.services.webhooks,
      request.params.id,
      session.principal.accountId,
    );
    if (endpoint === null) return notFound(reply, session);
    if (endpoint.state !== 'disabled' || !endpoint.past_retention)
      return reply.redirect(endpointPath(endpoint.id), 303);
    return sendSignedInPage(
      request,
      reply,
      restartConfirmationPage({ signedIn: signedInAs(session), endpoint }),
    );
  });

  app.post<EndpointParams>('/settings/integrations/webhooks/:id/delete', async (request, reply) => {
    const session = request.adminSession;
    const { accountId, userId } = session.principal;
    try {
      const endpoint = await request.server.services.webhooks.show(request.params.id, accountId);
      await request.server.services.webhooks.delete(endpoint.id, userId, accountId);
      await setFlash(request, session, {
        kind: 'success',
        message: `Webhook endpoint ${endpoint.url} deleted: nothing more is sent to it.`,
      });
    } catch (error) {
      if (!(error instanceof InputError)) throw error;
      await setFlash(request, session, { kind: 'error', message: `Nothing was changed: ${error.message}.` });
    }
    return reply.redirect(WEBHOOKS_PATH, 303);
  });

  for (const [name, action] of Object.entries(ENDPOINT_ACTIONS)) {
    app.post<EndpointParams>(`/settings/integrations/webhooks/:id/${name}`, async (request, reply) => {
      const session = request.adminSession;
      const { accountId, userId } = session.principal;
      const endpointId = request.params.id;
      try {
        const flash = await action({ request, endpointId, accountId, actor: userId });
        await setFlash(request, session, flash);
      } catch (error) {
        if (!(error instanceof InputError)) throw error;
        await setFlash(request, session, {
          kind: 'error',
          message: `Nothing was changed: ${error.message}.`,
        });
        if ((await findOwn(request.server.services.webhooks, endpointId, accountId)) === null)
          return reply.redirect(WEBHOOKS_PATH, 303);
      }
      return reply.redirect(endpointPath(endpointId), 303);
    });
  }
}
