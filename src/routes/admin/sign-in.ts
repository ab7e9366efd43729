import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { principalOfUser, refusalReason } from '../../admin/access.ts';
import { CSRF_FIELD, csrfTokenMatches, newCsrfToken } from '../../admin/csrf.ts';
import { formField } from '../../lib/form-field.ts';
import {
  adminCookieOptions,
  endSession,
  loadSession,
  SIGN_IN_COOKIE,
  startSession,
} from '../../admin/sessions.ts';
import { csrfFailurePage, refusalPage } from '../../admin/views/message-page.ts';
import { signInPage } from '../../admin/views/sign-in.ts';
import { INTEGRATIONS_PATH, SIGN_IN_PATH } from '../../paths.ts';
import { accountService } from '../../services/account-service.ts';
import { sendPage } from './responses.ts';

/** The sign-in form's CSRF token: the one the browser already holds, or a new one. */
function signInToken(request: FastifyRequest, reply: FastifyReply): string {
  const existing = request.cookies[SIGN_IN_COOKIE];
  if (existing !== undefined && /^[A-Za-z0-9_-]{43}$/.test(existing)) return existing;
  const token = newCsrfToken();
  reply.setCookie(SIGN_IN_COOKIE, token, adminCookieOptions(request));
  return token;
}

function waitDescription(seconds: number): string {
  if (seconds < 60) return `${seconds} second${seconds === 1 ? '' : 's'}`;
  const minutes = Math.ceil(seconds / 60);
  return `${minutes} minute${minutes === 1 ? '' : 's'}`;
}

export async function adminSignInRoutes(app: FastifyInstance): Promise<void> {
  app.get<{ Querystring: { 'signed-out'?: string } }>('/sign-in', async (request, reply) => {
    const session = await loadSession(request);
    if (session !== null && refusalReason(session.principal) === null) {
      return reply.redirect(INTEGRATIONS_PATH, 303);
    }
    const notice = request.query['signed-out'] === undefined ? undefined : 'You are signed out.';
    return sendPage(reply, 200, signInPage({ csrfToken: signInToken(request, reply), notice }));
  });

  app.post('/sign-in', async (request, reply) => {
    const email = formField(request.body, 'email').trim();
    const password = formField(request.body, 'password');
    const token = request.cookies[SIGN_IN_COOKIE];
    if (token === undefined || !csrfTokenMatches(token, formField(request.body, CSRF_FIELD))) {
      return sendPage(reply, 403, csrfFailurePage());
    }
    const again = (status: number, error: string) =>
      sendPage(reply, status, signInPage({ csrfToken: token, email, error }));
    if (email === '' || password === '') return again(400, 'Enter your email and password.');

    const result = await app.signIn.attempt(app.db, { email, password, address: request.ip });
    if (result.outcome === 'throttled') {
      const wait = result.retryAfterSeconds;
      reply.header('retry-after', wait);
      return again(
        429,
        `Too many failed sign-in attempts. Wait ${waitDescription(wait)} before trying again.`,
      );
    }
    if (result.outcome === 'incorrect') return again(401, 'The email or password is incorrect.');
    const { user } = result;

    const account = await accountService.findById(request.server.db, user.account_id);
    const reason =
      account === undefined
        ? 'Your account no longer exists.'
        : refusalReason(principalOfUser(user, account));
    if (reason !== null) {
      return sendPage(reply, 403, refusalPage(reason));
    }
    await startSession(request, reply, user);
    return reply.redirect(INTEGRATIONS_PATH, 303);
  });

  app.post('/sign-out', async (request, reply) => {
    const session = await loadSession(request);
    if (session === null) return reply.redirect(SIGN_IN_PATH, 303);
    if (!csrfTokenMatches(session.csrfToken, formField(request.body, CSRF_FIELD))) {
      return sendPage(reply, 403, csrfFailurePage());
    }
    await endSession(request, reply, session);
    return reply.redirect(`${SIGN_IN_PATH}?signed-out=1`, 303);
  });
}
