import { html } from '../../lib/html.ts';
import { ADMIN_PATH, SIGN_IN_PATH } from '../../paths.ts';
import { layout, type SignedIn } from './layout.ts';

/** A page that explains why something did not happen (refusal, bad CSRF token, not found, error). */
export function messagePage(options: {
  title: string;
  message: string;
  next?: { href: string; label: string };
  signedIn?: SignedIn | null;
}): string {
  const next = options.next
    ? html`<p><a class="button" href="${options.next.href}">${options.next.label}</a></p>`
    : null;
  return layout({
    title: options.title,
    signedIn: options.signedIn ?? null,
    body: html`<section class="card message">
  <h1>${options.title}</h1>
  <p>${options.message}</p>
  ${next}
</section>`,
  });
}

/** Why a signed-in (or correctly signing-in) person may not use the panel. */
export function refusalPage(reason: string): string {
  return messagePage({
    title: 'Access refused',
    message: reason,
    next: { href: SIGN_IN_PATH, label: 'Sign in as someone else' },
  });
}

export function csrfFailurePage(): string {
  return messagePage({
    title: 'Invalid or missing CSRF token',
    message:
      'This form was not sent from a current page of the admin panel, or your session has ended. Nothing was changed.',
    next: { href: ADMIN_PATH, label: 'Back to the admin panel' },
  });
}
