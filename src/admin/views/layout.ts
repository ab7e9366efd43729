import type { AdminPrincipal } from '../access.ts';
import { CSRF_FIELD } from '../csrf.ts';
import { html, type SafeHtml } from '../../lib/html.ts';
import {
  ADMIN_ASSETS_PATH,
  ADMIN_PATH,
  AUDIT_PATH,
  endpointPath,
  INTEGRATIONS_PATH,
  SIGN_OUT_PATH,
  WEBHOOKS_PATH,
} from '../../paths.ts';
import type { Flash } from '../sessions.ts';
import type { EndpointAlert } from '../../services/mail-service.ts';

export interface SignedIn {
  principal: AdminPrincipal;
  csrfToken: string;
  /** Endpoints disabled or failing for an hour: a banner on every page until they recover. */
  alerts?: EndpointAlert[];
}

export interface Page {
  title: string;
  body: SafeHtml;
  signedIn?: SignedIn | null;
  flash?: Flash | null;
  /** Where the page sits under Settings, e.g. ['Integrations']. */
  trail?: string[];
}

export function csrfField(token: string): SafeHtml {
  return html`<input type="hidden" name="${CSRF_FIELD}" value="${token}">`;
}

function flashBlock(flash: Flash): SafeHtml {
  if (flash.values === undefined) {
    return html`<div class="flash flash-${flash.kind}" role="${flash.kind === 'error' ? 'alert' : 'status'}">${flash.message}</div>`;
  }
  const secret = flash.secret;
  const warning = secret
    ? html`<p class="warning"><strong>Copy this ${secret.noun} now. It will not be shown again:</strong> ${secret.kept ?? 'only its hash is stored'}, so a lost ${secret.noun} cannot be recovered, ${secret.ifLost}.</p>`
    : null;
  return html`<section class="flash flash-success new-key" role="status" aria-labelledby="new-key-heading">
  <h2 id="new-key-heading">${flash.message}</h2>
  ${warning}
  ${flash.values.map(
    (field) => html`<label for="${field.id}">${field.label}</label>
  <div class="copy-row">
    <input id="${field.id}" class="key-value" type="text" readonly value="${field.value}" spellcheck="false" autocomplete="off">
    <button type="button" class="button" data-copy-target="${field.id}" hidden>Copy</button>
  </div>`,
  )}
  ${flash.note === undefined ? null : html`<p>${flash.note}</p>`}
  <p class="copy-status" aria-live="polite"></p>
</section>`;
}

function header(signedIn: SignedIn | null | undefined): SafeHtml {
  const account = signedIn
    ? html`<div class="who">
    <span>${signedIn.principal.name} <span class="muted">(${signedIn.principal.accountName})</span></span>
    <form method="post" action="${SIGN_OUT_PATH}">${csrfField(signedIn.csrfToken)}<button type="submit" class="button button-quiet">Sign out</button></form>
  </div>`
    : null;
  return html`<header class="site-header">
  <a class="brand" href="${ADMIN_PATH}">Safety Incident API · Admin</a>
  ${account}
</header>`;
}

/** The account's endpoints in trouble, each linked to its page: on every page until they recover. */
function alertBanner(alerts: EndpointAlert[] | undefined): SafeHtml | null {
  if (alerts === undefined || alerts.length === 0) return null;
  return html`<section class="flash flash-error webhook-alerts" role="alert" aria-label="Webhook endpoints in trouble">
  <ul>${alerts.map(
    (alert) =>
      html`<li>Webhook endpoint <a href="${endpointPath(alert.id)}">${alert.name}</a> ${
        alert.problem === 'disabled'
          ? 'is disabled: it receives nothing until it is enabled again.'
          : `has failed every delivery since ${alert.since ?? ''}.`
      }</li>`,
  )}</ul>
</section>`;
}

/** The pages of Settings › Integrations: the trail step each heads, and its link. */
const INTEGRATIONS_PAGES = [
  { step: 'Integrations', label: 'API keys and OAuth clients', href: INTEGRATIONS_PATH },
  { step: 'Webhooks', label: 'Webhooks', href: WEBHOOKS_PATH },
  { step: 'Audit trail', label: 'Audit trail', href: AUDIT_PATH },
] as const;

/**
 * Links between the pages of Settings › Integrations, on each of them. The current one is marked
 * `aria-current` (and, in the stylesheet, bold and underlined, not only coloured): `page` on the
 * page itself, `true` on the pages under it (an endpoint, a key).
 */
function integrationsNav(trail: string[]): SafeHtml | null {
  if (trail[0] !== 'Integrations') return null;
  // Pages other than the first sit one step deeper: Integrations › Webhooks › an endpoint.
  const sub = INTEGRATIONS_PAGES.find((link) => link.step !== 'Integrations' && link.step === trail[1]);
  const current = sub?.step ?? 'Integrations';
  const depth = sub === undefined ? 1 : 2;
  const links = INTEGRATIONS_PAGES.map((link) => {
    const mark = link.step !== current ? null : trail.length === depth ? 'page' : 'true';
    return html`<li><a href="${link.href}"${mark === null ? null : html` aria-current="${mark}"`}>${link.label}</a></li>`;
  });
  return html`<nav aria-label="Integrations" class="subnav"><ul>${links}</ul></nav>`;
}

/** The one layout of the panel. Scripts and styles are files served by the product (see the CSP). */
export function layout(page: Page): string {
  const trail = page.trail
    ? html`<nav aria-label="Breadcrumb" class="breadcrumb"><ol><li>Settings</li>${page.trail.map(
        (step) => html`<li>${step}</li>`,
      )}</ol></nav>`
    : null;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${page.title} · Safety Incident API admin</title>
<link rel="stylesheet" href="${ADMIN_ASSETS_PATH}/admin.css">
<script src="${ADMIN_ASSETS_PATH}/admin.js" defer></script>
</head>
<body>
<a class="skip-link" href="#main">Skip to content</a>
${header(page.signedIn)}
<main id="main" tabindex="-1">
${alertBanner(page.signedIn?.alerts)}
${trail}
${page.trail ? integrationsNav(page.trail) : null}
${page.flash ? flashBlock(page.flash) : null}
${page.body}
</main>
</body>
</html>`.value;
}
