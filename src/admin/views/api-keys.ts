import { API_KEY_SCOPES, type ApiKeyScope } from '../../auth/api-keys.ts';
import type { AuditEventRow } from '../../db/repositories/audit-events.ts';
import { INTEGRATIONS_PATH, KEYS_PATH } from '../../paths.ts';
import type { ApiKeyView } from '../../services/api-key-service.ts';
import { html, type SafeHtml } from '../../lib/html.ts';
import { dateTime } from './format.ts';
import { csrfField, type Page, type SignedIn } from './layout.ts';

const EXPIRY_WARNING_MS = 7 * 24 * 3600 * 1000;

export function keyPath(keyId: string): string {
  return `${KEYS_PATH}/${encodeURIComponent(keyId)}`;
}

const STATE_NAMES: Record<ApiKeyView['state'], string> = {
  active: 'Active',
  disabled: 'Disabled',
  revoked: 'Revoked',
  expired: 'Expired',
};

const ACTION_NAMES: Record<string, string> = {
  created: 'Created',
  renamed: 'Renamed',
  scope_changed: 'Changed scope',
  disabled: 'Disabled',
  enabled: 'Enabled',
  revoked: 'Revoked',
};

function expiresSoon(key: ApiKeyView, now: Date): boolean {
  return (
    key.state === 'active' &&
    key.expires_at !== null &&
    Date.parse(key.expires_at) - now.getTime() <= EXPIRY_WARNING_MS
  );
}

function stateBadge(key: ApiKeyView, now: Date): SafeHtml {
  const soon = expiresSoon(key, now) ? html` <span class="badge badge-warning">Expires soon</span>` : null;
  return html`<span class="badge badge-${key.state}">${STATE_NAMES[key.state]}</span>${soon}`;
}

/** Who did something: a user's name, "command line" for the CLI, or the stored actor as it is. */
export function actorName(actor: string | null, userNames: Map<string, string>): string {
  if (actor === null) return 'Unknown';
  if (actor === 'cli') return 'command line';
  return userNames.get(actor) ?? actor;
}

function scopeOptions(selected: ApiKeyScope): SafeHtml[] {
  return API_KEY_SCOPES.map(
    (scope) => html`<option value="${scope}"${scope === selected ? html` selected` : null}>${scope}</option>`,
  );
}

function createForm(csrfToken: string): SafeHtml {
  return html`<form method="post" action="${KEYS_PATH}" class="create-key stack" aria-labelledby="create-key-heading">
  <h3 id="create-key-heading">Create a key</h3>
  ${csrfField(csrfToken)}
  <label for="key-name">Name</label>
  <input id="key-name" name="name" type="text" required maxlength="100" placeholder="e.g. Power BI export" aria-describedby="key-name-hint">
  <p id="key-name-hint" class="hint">One key per integration, so each can be revoked on its own.</p>
  <label for="key-scope">Scope</label>
  <select id="key-scope" name="scope">${scopeOptions('read')}</select>
  <label for="key-expiry">Expiry date <span class="muted">(optional)</span></label>
  <input id="key-expiry" name="expires_at" type="date" aria-describedby="key-expiry-hint">
  <p id="key-expiry-hint" class="hint">The key works through the end of that day (UTC). Leave empty for no expiry.</p>
  <button type="submit" class="button button-primary">Create key</button>
</form>`;
}

function keyTable(keys: ApiKeyView[], userNames: Map<string, string>, now: Date): SafeHtml {
  if (keys.length === 0) return html`<p>No API keys yet.</p>`;
  const rows = keys.map(
    (key) => html`<tr data-key-id="${key.id}">
  <td data-label="Name"><a href="${keyPath(key.id)}">${key.name}</a></td>
  <td data-label="Prefix"><code>${key.prefix}…</code></td>
  <td data-label="Scope">${key.scope}</td>
  <td data-label="State">${stateBadge(key, now)}</td>
  <td data-label="Last used">${dateTime(key.last_used_at)}</td>
  <td data-label="Expires">${dateTime(key.expires_at)}</td>
  <td data-label="Created by">${actorName(key.created_by, userNames)}</td>
  <td data-label="Created">${dateTime(key.created_at)}</td>
</tr>`,
  );
  return html`<div class="table-wrap"><table class="responsive" id="api-keys-table">
  <caption class="visually-hidden">API keys</caption>
  <thead><tr><th scope="col">Name</th><th scope="col">Prefix</th><th scope="col">Scope</th><th scope="col">State</th><th scope="col">Last used</th><th scope="col">Expires</th><th scope="col">Created by</th><th scope="col">Created</th></tr></thead>
  <tbody>${rows}</tbody>
</table></div>`;
}

function auditTrail(
  events: AuditEventRow[],
  keyNames: Map<string, string>,
  userNames: Map<string, string>,
): SafeHtml {
  const body =
    events.length === 0
      ? html`<p>No key events yet.</p>`
      : html`<div class="table-wrap"><table class="responsive" id="audit-trail-table">
  <caption class="visually-hidden">API key events, newest first</caption>
  <thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">Action</th><th scope="col">Key</th><th scope="col">Details</th></tr></thead>
  <tbody>${events.map(
    (event) => html`<tr>
  <td data-label="When">${dateTime(event.created_at)}</td>
  <td data-label="Who">${actorName(event.actor, userNames)}</td>
  <td data-label="Action">${ACTION_NAMES[event.action] ?? event.action}</td>
  <td data-label="Key">${keyNames.get(event.subject_id) ?? event.subject_id}</td>
  <td data-label="Details">${event.detail ?? ''}</td>
</tr>`,
  )}</tbody>
</table></div>`;
  return html`<h3 id="audit-heading">Audit trail</h3>${body}`;
}

export function integrationsPage(options: {
  signedIn: SignedIn;
  keys: ApiKeyView[];
  events: AuditEventRow[];
  userNames: Map<string, string>;
  oauthClients: SafeHtml;
  now: Date;
}): Page {
  const { signedIn, keys, events, userNames, now } = options;
  const keyNames = new Map(keys.map((key) => [key.id, key.name]));
  return {
    title: 'Integrations',
    trail: ['Integrations'],
    signedIn,
    body: html`<h1>Integrations</h1>
<section class="card" id="api-keys" aria-labelledby="api-keys-heading">
  <h2 id="api-keys-heading">API keys</h2>
  <p>Keys give integrations read access to this account's data through the public API. Every change takes effect at the key's next request.</p>
  ${keyTable(keys, userNames, now)}
  ${createForm(signedIn.csrfToken)}
  ${auditTrail(events, keyNames, userNames)}
</section>
${options.oauthClients}`,
  };
}

export function apiKeyPage(options: {
  signedIn: SignedIn;
  key: ApiKeyView;
  userNames: Map<string, string>;
  now: Date;
}): Page {
  const { signedIn, key, now } = options;
  const token = signedIn.csrfToken;
  const path = keyPath(key.id);
  const toggle =
    key.state === 'disabled'
      ? html`<form method="post" action="${path}/enable">${csrfField(token)}<button type="submit" class="button">Enable key</button></form>`
      : key.state === 'revoked'
        ? null
        : html`<form method="post" action="${path}/disable">${csrfField(token)}<button type="submit" class="button">Disable key</button></form>`;
  const revoke =
    key.state === 'revoked'
      ? html`<p>This key is revoked: it can never be used again.</p>`
      : html`<p><a class="button button-danger" href="${path}/revoke">Revoke key…</a></p>`;
  return {
    title: key.name,
    trail: ['Integrations', 'API keys', key.name],
    signedIn,
    body: html`<p><a href="${INTEGRATIONS_PATH}#api-keys">← All API keys</a></p>
<h1>API key “${key.name}”</h1>
<section class="card" aria-labelledby="key-details-heading">
  <h2 id="key-details-heading">Details</h2>
  <dl class="details">
    <dt>Prefix</dt><dd><code>${key.prefix}…</code></dd>
    <dt>Scope</dt><dd>${key.scope}</dd>
    <dt>State</dt><dd id="key-state">${stateBadge(key, now)}</dd>
    <dt>Last used</dt><dd>${dateTime(key.last_used_at)}</dd>
    <dt>Expires</dt><dd>${dateTime(key.expires_at)}</dd>
    <dt>Created by</dt><dd>${actorName(key.created_by, options.userNames)}</dd>
    <dt>Created</dt><dd>${dateTime(key.created_at)}</dd>
  </dl>
</section>
<section class="card stack" aria-labelledby="key-change-heading">
  <h2 id="key-change-heading">Change</h2>
  <form method="post" action="${path}/rename" class="inline-form">
    ${csrfField(token)}
    <label for="rename-name">Name</label>
    <input id="rename-name" name="name" type="text" required maxlength="100" value="${key.name}">
    <button type="submit" class="button">Rename</button>
  </form>
  <form method="post" action="${path}/scope" class="inline-form">
    ${csrfField(token)}
    <label for="change-scope">Scope</label>
    <select id="change-scope" name="scope">${scopeOptions(key.scope)}</select>
    <button type="submit" class="button">Change scope</button>
  </form>
  ${toggle}
</section>
<section class="card" aria-labelledby="key-revoke-heading">
  <h2 id="key-revoke-heading">Revoke</h2>
  ${revoke}
</section>`,
  };
}

export function revokeConfirmationPage(options: { signedIn: SignedIn; key: ApiKeyView }): Page {
  const { signedIn, key } = options;
  const path = keyPath(key.id);
  return {
    title: `Revoke ${key.name}`,
    trail: ['Integrations', 'API keys', key.name, 'Revoke'],
    signedIn,
    body: html`<section class="card message" aria-labelledby="revoke-heading">
  <h1 id="revoke-heading">Revoke API key “${key.name}”?</h1>
  <p class="warning">Revoking is permanent. From its next request, every call with the key <code>${key.prefix}…</code> is refused with 401 API_KEY_INVALID, and the key cannot be enabled again.</p>
  <form method="post" action="${path}/revoke" class="actions">
    ${csrfField(signedIn.csrfToken)}
    <button type="submit" class="button button-danger">Revoke permanently</button>
    <a class="button button-quiet" href="${path}">Cancel</a>
  </form>
</section>`,
  };
}
