import { createHmac, timingSafeEqual } from 'node:crypto';
import formbody from '@fastify/formbody';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Interaction, Provider } from 'oidc-provider';
import { roleName } from '../auth/roles.ts';
import { type UserAccountRow, userRepository } from '../db/repositories/users.ts';
import { OAUTH_PATH } from '../paths.ts';
import { formField } from '../lib/form-field.ts';
import { clientAccountId, userMayUseAccount } from './accounts.ts';
import { ACCOUNT_DATA_APPROVER_ROLES, ACCOUNT_DATA_SCOPES } from './scopes.ts';
import { approvalRefusedPage, consentPage, messagePage, PAGE_SECURITY_HEADERS, signInPage } from './views.ts';

/**
 * The sign-in and consent pages of the authorization server, served by the product. Each POST
 * needs the interaction cookie oidc-provider set (SameSite=Lax, signed) and a form token bound to
 * the interaction, so another site can neither submit nor replay these forms.
 */

export interface InteractionOptions {
  provider: Provider;
  /** Secret for the form tokens (the first cookie key). */
  formTokenSecret: string;
}

const EXPIRED = 'This sign-in request has expired or was already completed. Return to the app and try again.';

const VENDOR_SUPPORT_REFUSAL = 'Vendor support users cannot connect partner apps to a customer account.';

const requestedScopes = (interaction: Interaction): string[] =>
  String(interaction.params.scope ?? '')
    .split(' ')
    .filter((scope) => scope !== '');

/**
 * Why this person may not approve what the app asks for, or null if they may. An app asking for
 * account-wide data is refused as a whole rather than granted less than it asked for: an app that
 * silently gets fewer scopes fails later, far from the reason.
 */
function approvalRefusal(user: UserAccountRow, scopes: string[]): string | null {
  if (user.active !== 1) return 'Your user account is deactivated.';
  if (user.vendor_support === 1) return VENDOR_SUPPORT_REFUSAL;
  const data = scopes.filter((scope) => ACCOUNT_DATA_SCOPES.includes(scope));
  if (data.length > 0 && !ACCOUNT_DATA_APPROVER_ROLES.includes(user.role)) {
    return (
      `The app asks to read your organization's data (${data.join(', ')}). Only an Admin or ` +
      `Super Admin can allow that, and your role is ${roleName(user.role)}. Ask an Admin to connect the app.`
    );
  }
  return null;
}

function formToken(secret: string, uid: string): string {
  return createHmac('sha256', secret).update(`oauth-interaction:${uid}`).digest('base64url');
}

function formTokenValid(secret: string, uid: string, given: string): boolean {
  const expected = Buffer.from(formToken(secret, uid));
  const actual = Buffer.from(given);
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

function sendPage(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).headers(PAGE_SECURITY_HEADERS).type('text/html; charset=utf-8').send(body);
}

export async function interactionRoutes(app: FastifyInstance, options: InteractionOptions): Promise<void> {
  const { provider, formTokenSecret } = options;
  if (!app.hasContentTypeParser('application/x-www-form-urlencoded')) await app.register(formbody);

  const actionUrl = (uid: string, action: string) => `${OAUTH_PATH}/interaction/${uid}/${action}`;

  /** The interaction the cookie names, if it is the one in the URL; otherwise the reply is sent. */
  async function currentInteraction(
    request: FastifyRequest,
    reply: FastifyReply,
  ): Promise<Interaction | null> {
    const { uid } = request.params as { uid: string };
    try {
      const interaction = await provider.interactionDetails(request.raw, reply.raw);
      if (interaction.uid === uid) return interaction;
    } catch (error) {
      if (!(error instanceof Error && error.name === 'SessionNotFound')) throw error;
    }
    sendPage(reply, 400, messagePage('Sign-in expired', EXPIRED));
    return null;
  }

  /** As `currentInteraction`, for a form post: the form token must match the interaction too. */
  async function postedInteraction(
    request: FastifyRequest,
    reply: FastifyReply,
  ): Promise<Interaction | null> {
    const interaction = await currentInteraction(request, reply);
    if (interaction === null) return null;
    if (formTokenValid(formTokenSecret, interaction.uid, formField(request.body, 'csrf_token')))
      return interaction;
    sendPage(
      reply,
      403,
      messagePage('Request refused', 'The form has expired. Reload the page and try again.'),
    );
    return null;
  }

  async function clientOf(interaction: Interaction) {
    const client = await provider.Client.find(String(interaction.params.client_id));
    if (client === undefined) throw new Error('the interaction names a client that no longer exists');
    return client;
  }

  function renderSignIn(interaction: Interaction, clientName: string, email: string, error: string | null) {
    return signInPage({
      action: actionUrl(interaction.uid, 'login'),
      csrfToken: formToken(formTokenSecret, interaction.uid),
      clientName,
      email,
      error,
    });
  }

  function sendRefusal(reply: FastifyReply, interaction: Interaction, clientName: string, reason: string) {
    return sendPage(
      reply,
      403,
      approvalRefusedPage({
        abortAction: actionUrl(interaction.uid, 'abort'),
        csrfToken: formToken(formTokenSecret, interaction.uid),
        clientName,
        reason,
      }),
    );
  }

  app.get('/interaction/:uid', async (request, reply) => {
    const interaction = await currentInteraction(request, reply);
    if (interaction === null) return reply;
    const client = await clientOf(interaction);
    const clientName = client.clientName ?? client.clientId;

    if (interaction.prompt.name === 'login') {
      return sendPage(reply, 200, renderSignIn(interaction, clientName, '', null));
    }
    const user = await userRepository.findById(app.db, String(interaction.session?.accountId));
    if (user === undefined) return sendPage(reply, 400, messagePage('Sign-in expired', EXPIRED));
    const refusal = approvalRefusal(user, requestedScopes(interaction));
    if (refusal !== null) return sendRefusal(reply, interaction, clientName, refusal);
    return sendPage(
      reply,
      200,
      consentPage({
        confirmAction: actionUrl(interaction.uid, 'confirm'),
        abortAction: actionUrl(interaction.uid, 'abort'),
        csrfToken: formToken(formTokenSecret, interaction.uid),
        clientName,
        userName: user.name,
        scopes: requestedScopes(interaction),
      }),
    );
  });

  app.post('/interaction/:uid/login', async (request, reply) => {
    const interaction = await postedInteraction(request, reply);
    if (interaction === null) return reply;
    if (interaction.prompt.name !== 'login')
      return sendPage(reply, 400, messagePage('Sign-in expired', EXPIRED));

    const client = await clientOf(interaction);
    const clientName = client.clientName ?? client.clientId;
    const email = formField(request.body, 'email').trim();
    const password = formField(request.body, 'password');
    if (email === '' || password === '') {
      return sendPage(
        reply,
        400,
        renderSignIn(interaction, clientName, email, 'Enter your email and password.'),
      );
    }

    // The same sign-in, and the same count, as the admin panel's form.
    const result = await app.signIn.attempt(app.db, { email, password, address: request.ip });
    if (result.outcome === 'throttled') {
      const wait = result.retryAfterSeconds;
      const minutes = Math.ceil(wait / 60);
      const message = `Too many failed sign-in attempts. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`;
      return sendPage(
        reply.header('retry-after', wait),
        429,
        renderSignIn(interaction, clientName, email, message),
      );
    }
    const user = result.outcome === 'signed-in' ? result.user : undefined;
    if (user === undefined || user.active !== 1) {
      return sendPage(
        reply,
        401,
        renderSignIn(interaction, clientName, email, 'Email or password is incorrect.'),
      );
    }
    if (user.vendor_support === 1) {
      return sendPage(reply, 403, renderSignIn(interaction, clientName, '', VENDOR_SUPPORT_REFUSAL));
    }
    if (!userMayUseAccount(user, clientAccountId(client))) {
      return sendPage(
        reply,
        403,
        renderSignIn(interaction, clientName, '', `${clientName} is not registered for your organization.`),
      );
    }

    // Checked here too, not only on the consent page: a grant approved earlier (before a
    // demotion, say) would skip the consent page altogether.
    const refusal = approvalRefusal(user, requestedScopes(interaction));
    if (refusal !== null) return sendRefusal(reply, interaction, clientName, refusal);

    reply.hijack();
    await provider.interactionFinished(
      request.raw,
      reply.raw,
      { login: { accountId: user.id } },
      { mergeWithLastSubmission: false },
    );
    return reply;
  });

  app.post('/interaction/:uid/confirm', async (request, reply) => {
    const interaction = await postedInteraction(request, reply);
    if (interaction === null) return reply;
    const accountId = interaction.session?.accountId;
    if (interaction.prompt.name !== 'consent' || accountId === undefined) {
      return sendPage(reply, 400, messagePage('Sign-in expired', EXPIRED));
    }

    const user = await userRepository.findById(app.db, accountId);
    const refusal =
      user === undefined
        ? 'Your user account no longer exists.'
        : approvalRefusal(user, requestedScopes(interaction));
    if (refusal !== null) {
      reply.hijack();
      await provider.interactionFinished(
        request.raw,
        reply.raw,
        { error: 'access_denied', error_description: refusal },
        { mergeWithLastSubmission: false },
      );
      return reply;
    }

    const clientId = String(interaction.params.client_id);
    const grant =
      (interaction.grantId === undefined ? undefined : await provider.Grant.find(interaction.grantId)) ??
      new provider.Grant({ accountId, clientId });
    const details = interaction.prompt.details as {
      missingOIDCScope?: string[];
      missingOIDCClaims?: string[];
      missingResourceScopes?: Record<string, string[]>;
    };
    if (details.missingOIDCScope) grant.addOIDCScope(details.missingOIDCScope.join(' '));
    if (details.missingOIDCClaims) grant.addOIDCClaims(details.missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(details.missingResourceScopes ?? {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    const grantId = await grant.save();

    reply.hijack();
    await provider.interactionFinished(
      request.raw,
      reply.raw,
      { consent: interaction.grantId === undefined ? { grantId } : {} },
      { mergeWithLastSubmission: true },
    );
    return reply;
  });

  app.post('/interaction/:uid/abort', async (request, reply) => {
    const interaction = await postedInteraction(request, reply);
    if (interaction === null) return reply;
    reply.hijack();
    await provider.interactionFinished(
      request.raw,
      reply.raw,
      { error: 'access_denied', error_description: 'The user denied access to the app.' },
      { mergeWithLastSubmission: false },
    );
    return reply;
  });
}
