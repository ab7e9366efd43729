import { html } from '../../lib/html.ts';
import { SIGN_IN_PATH } from '../../paths.ts';
import { csrfField, layout } from './layout.ts';

export function signInPage(options: {
  csrfToken: string;
  email?: string;
  error?: string;
  notice?: string;
}): string {
  const error = options.error
    ? html`<div class="flash flash-error" role="alert" id="sign-in-error">${options.error}</div>`
    : null;
  const notice = options.notice
    ? html`<div class="flash flash-success" role="status">${options.notice}</div>`
    : null;
  return layout({
    title: 'Sign in',
    body: html`<section class="card narrow">
  <h1>Sign in</h1>
  <p class="muted">For Super Admins managing their account's API keys.</p>
  ${notice}${error}
  <form method="post" action="${SIGN_IN_PATH}" class="stack">
    ${csrfField(options.csrfToken)}
    <label for="email">Email</label>
    <input id="email" name="email" type="email" autocomplete="username" required value="${options.email ?? ''}"${options.error ? html` aria-describedby="sign-in-error"` : null}>
    <label for="password">Password</label>
    <input id="password" name="password" type="password" autocomplete="current-password" required>
    <button type="submit" class="button button-primary">Sign in</button>
  </form>
</section>`,
  });
}
