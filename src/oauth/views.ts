import { html, type SafeHtml } from '../lib/html.ts';
import { SCOPE_DESCRIPTIONS } from './scopes.ts';

/**
 * The pages a person sees while a partner app asks for access: sign-in, consent and errors.
 * Every value is escaped by the `html` template of the product; the pages load nothing external.
 */

/**
 * No scripts, no external resources, never framed (a framed consent page invites clickjacking).
 * `form-action` is left out on purpose: browsers apply it to the redirect back to the partner app.
 */
export const PAGE_SECURITY_HEADERS = {
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'cache-control': 'no-store',
  'referrer-policy': 'no-referrer',
};

const STYLE = `body{font-family:system-ui,sans-serif;background:#f4f5f7;color:#1d232b;margin:0}
main{max-width:26rem;margin:4rem auto;background:#fff;padding:2rem;border-radius:8px;box-shadow:0 1px 3px #0002}
h1{font-size:1.3rem;margin-top:0}label{display:block;margin:1rem 0 .3rem;font-weight:600}
input[type=email],input[type=password]{width:100%;box-sizing:border-box;padding:.55rem;font-size:1rem}
button{margin-top:1.2rem;padding:.6rem 1.2rem;font-size:1rem;border-radius:4px;border:1px solid #1f5fbf;background:#1f5fbf;color:#fff;cursor:pointer}
button.secondary{background:#fff;color:#1f5fbf}.error{background:#fdecea;color:#8a1c12;padding:.7rem;border-radius:4px}
.muted{color:#5b6572;font-size:.9rem}ul{padding-left:1.2rem}`;

function page(title: string, body: SafeHtml): string {
  return html`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · Safety Incident API</title><style>${STYLE}</style></head>
<body><main>${body}</main></body>
</html>`.toString();
}

const errorBlock = (message: string | null) =>
  message === null ? null : html`<p class="error" role="alert">${message}</p>`;

export function signInPage(input: {
  action: string;
  csrfToken: string;
  clientName: string;
  email: string;
  error: string | null;
}): string {
  return page(
    'Sign in',
    html`<h1>Sign in to continue to ${input.clientName}</h1>
${errorBlock(input.error)}
<form method="post" action="${input.action}" autocomplete="on">
<input type="hidden" name="csrf_token" value="${input.csrfToken}">
<label for="email">Email</label>
<input id="email" name="email" type="email" required autofocus value="${input.email}">
<label for="password">Password</label>
<input id="password" name="password" type="password" required autocomplete="current-password">
<button type="submit">Sign in</button>
</form>
<p class="muted">Use the email and password of your Safety Incident account.</p>`,
  );
}

export function consentPage(input: {
  confirmAction: string;
  abortAction: string;
  csrfToken: string;
  clientName: string;
  userName: string;
  scopes: string[];
}): string {
  const token = html`<input type="hidden" name="csrf_token" value="${input.csrfToken}">`;
  return page(
    'Allow access',
    html`<h1>${input.clientName} wants to access your account</h1>
<p>Signed in as ${input.userName}. ${input.clientName} will be able to:</p>
<ul>${input.scopes.map((scope) => html`<li>${SCOPE_DESCRIPTIONS[scope] ?? scope}</li>`)}</ul>
<form method="post" action="${input.confirmAction}">${token}<button type="submit">Allow</button></form>
<form method="post" action="${input.abortAction}">${token}<button type="submit" class="secondary">Deny</button></form>`,
  );
}

/** Access a person may not approve: why, and the one way on, back to the app (access_denied). */
export function approvalRefusedPage(input: {
  abortAction: string;
  csrfToken: string;
  clientName: string;
  reason: string;
}): string {
  return page(
    'Access not allowed',
    html`<h1>${input.clientName} cannot be connected with your account</h1>
${errorBlock(input.reason)}
<form method="post" action="${input.abortAction}"><input type="hidden" name="csrf_token" value="${input.csrfToken}"><button type="submit">Return to ${input.clientName}</button></form>`,
  );
}

export function messagePage(title: string, message: string): string {
  return page(title, html`<h1>${title}</h1>${errorBlock(message)}`);
}
