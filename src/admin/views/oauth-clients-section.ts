import { INTEGRATIONS_PATH, OAUTH_CLIENTS_PATH } from '../../paths.ts';
import { ROLL_OVERLAPS, type RollOverlap } from '../../services/api-key-service.ts';
import type { OauthClientView, OauthGrantView } from '../../services/oauth-client-service.ts';
import { html, type SafeHtml } from '../../lib/html.ts';
import { dateTime } from './format.ts';
import { csrfField, type Page, type SignedIn } from './layout.ts';

export function clientPath(clientId: string): string {
  return `${OAUTH_CLIENTS_PATH}/${encodeURIComponent(clientId)}`;
}

/** The form's client types; the value is what the create form posts. */
export const CLIENT_TYPES = {
  confidential: 'Confidential: a server-side app that keeps a secret',
  public: 'Public: a mobile or single-page app, no secret (PKCE only)',
} as const;

function typeName(client: OauthClientView): string {
  return client.type === 'public' ? 'Public (PKCE, no secret)' : 'Confidential';
}

function clientTable(clients: OauthClientView[]): SafeHtml {
  if (clients.length === 0) return html`<p>No OAuth clients registered.</p>`;
  const rows = clients.map(
    (client) => html`<tr data-client-id="${client.client_id}">
  <td data-label="Name">${client.name}</td>
  <td data-label="Client ID"><code>${client.client_id}</code></td>
  <td data-label="Type">${typeName(client)}</td>
  <td data-label="Redirect URIs"><div>${client.redirect_uris.map((uri) => html`<code>${uri}</code><br>`)}</div></td>
  <td data-label="Created">${dateTime(client.created_at)}</td>
  <td data-label="Actions"><a href="${clientPath(client.client_id)}" aria-label="Manage ${client.name}">Manage…</a> <a href="${clientPath(client.client_id)}/delete" aria-label="Delete ${client.name}">Delete…</a></td>
</tr>`,
  );
  return html`<div class="table-wrap"><table class="responsive" id="oauth-clients-table">
  <caption class="visually-hidden">OAuth clients</caption>
  <thead><tr><th scope="col">Name</th><th scope="col">Client ID</th><th scope="col">Type</th><th scope="col">Redirect URIs</th><th scope="col">Created</th><th scope="col">Actions</th></tr></thead>
  <tbody>${rows}</tbody>
</table></div>`;
}

function createForm(csrfToken: string): SafeHtml {
  const types = Object.entries(CLIENT_TYPES).map(
    ([value, label]) => html`<option value="${value}">${label}</option>`,
  );
  return html`<form method="post" action="${OAUTH_CLIENTS_PATH}" class="create-key stack" aria-labelledby="create-client-heading">
  <h3 id="create-client-heading">Register a client</h3>
  ${csrfField(csrfToken)}
  <label for="client-name">Client name</label>
  <input id="client-name" name="name" type="text" required maxlength="100" placeholder="e.g. Acme BI" aria-describedby="client-name-hint">
  <p id="client-name-hint" class="hint">People see this name when the app asks for their approval.</p>
  <label for="client-redirect-uris">Redirect URIs</label>
  <textarea id="client-redirect-uris" name="redirect_uris" rows="3" required spellcheck="false" autocomplete="off" aria-describedby="client-redirect-uris-hint"></textarea>
  <p id="client-redirect-uris-hint" class="hint">One per line. Each must use https (http only to localhost or 127.0.0.1) and have no #fragment.</p>
  <label for="client-type">Client type</label>
  <select id="client-type" name="type">${types}</select>
  <button type="submit" class="button button-primary">Register client</button>
</form>`;
}

/** The "OAuth clients" section of Settings > Integrations: the partner apps of the account. */
export function oauthClientsSection(options: { clients: OauthClientView[]; csrfToken: string }): SafeHtml {
  return html`<section class="card" id="oauth-clients" aria-labelledby="oauth-clients-heading">
  <h2 id="oauth-clients-heading">OAuth clients</h2>
  <p>Partner apps connect to this account through OAuth 2: people sign in and approve them, or a confidential client acts on its own with its secret. Deleting a client ends all its tokens at their next use.</p>
  ${clientTable(options.clients)}
  ${createForm(options.csrfToken)}
</section>`;
}

export function deleteConfirmationPage(options: { signedIn: SignedIn; client: OauthClientView }): Page {
  const { signedIn, client } = options;
  const path = clientPath(client.client_id);
  return {
    title: `Delete ${client.name}`,
    trail: ['Integrations', 'OAuth clients', client.name, 'Delete'],
    signedIn,
    body: html`<section class="card message" aria-labelledby="delete-client-heading">
  <h1 id="delete-client-heading">Delete OAuth client “${client.name}”?</h1>
  <p class="warning">Deleting is permanent. Every access and refresh token of <code>${client.client_id}</code> stops working at its next use, and the app can no longer sign anyone in or request tokens.</p>
  <form method="post" action="${path}/delete" class="actions">
    ${csrfField(signedIn.csrfToken)}
    <button type="submit" class="button button-danger">Delete permanently</button>
    <a class="button button-quiet" href="${INTEGRATIONS_PATH}#oauth-clients">Cancel</a>
  </form>
</section>`,
  };
}

const OVERLAP_NAMES: Record<RollOverlap, string> = {
  now: 'Now (the old secret stops at once)',
  '1h': 'In 1 hour',
  '24h': 'In 24 hours',
  '7d': 'In 7 days',
};

function rotateSecretForm(client: OauthClientView, token: string): SafeHtml {
  if (client.type === 'public') {
    return html`<p>A public client has no secret: it signs people in with PKCE only.</p>`;
  }
  const choices = (Object.keys(ROLL_OVERLAPS) as RollOverlap[]).map(
    (
      overlap,
    ) => html`<div class="choice"><input type="radio" id="overlap-${overlap}" name="overlap" value="${overlap}"${overlap === '24h' ? html` checked` : null}>
    <label for="overlap-${overlap}">${OVERLAP_NAMES[overlap]}</label></div>`,
  );
  return html`<p>Rotating makes a new secret and shows it once. The old secret keeps working until the time you choose, so the app can be redeployed without an outage.</p>
  <form method="post" action="${clientPath(client.client_id)}/rotate-secret" class="stack">
    ${csrfField(token)}
    <fieldset>
      <legend>The old secret stops working</legend>
      ${choices}
    </fieldset>
    <button type="submit" class="button">Rotate secret</button>
  </form>`;
}

function grantsTable(client: OauthClientView, grants: OauthGrantView[], token: string): SafeHtml {
  if (grants.length === 0) return html`<p>No one has granted this app access.</p>`;
  const rows = grants.map((grant) => {
    const who = grant.user_name ?? grant.user_id ?? 'Unknown user';
    return html`<tr data-grant-id="${grant.grant_id}">
  <td data-label="User">${who}${grant.user_email === null ? null : html`<br><span class="muted">${grant.user_email}</span>`}</td>
  <td data-label="Scopes">${grant.scopes.map((scope) => html`<code>${scope}</code> `)}</td>
  <td data-label="Granted">${dateTime(grant.granted_at, 'Unknown')}</td>
  <td data-label="Last token use">${dateTime(grant.last_used_at)}</td>
  <td data-label="Actions"><form method="post" action="${clientPath(client.client_id)}/grants/${encodeURIComponent(grant.grant_id)}/revoke">
    ${csrfField(token)}
    <button type="submit" class="button button-danger" aria-label="Revoke the grant of ${who}">Revoke</button>
  </form></td>
</tr>`;
  });
  return html`<div class="table-wrap"><table class="responsive" id="grants-table">
  <caption class="visually-hidden">Users who granted ${client.name} access</caption>
  <thead><tr><th scope="col">User</th><th scope="col">Scopes</th><th scope="col">Granted</th><th scope="col">Last token use</th><th scope="col">Actions</th></tr></thead>
  <tbody>${rows}</tbody>
</table></div>`;
}

/** A client's own page: its secret rotation and the users who granted it access. */
export function clientPage(options: {
  signedIn: SignedIn;
  client: OauthClientView;
  grants: OauthGrantView[];
}): Page {
  const { signedIn, client, grants } = options;
  return {
    title: client.name,
    trail: ['Integrations', 'OAuth clients', client.name],
    signedIn,
    body: html`<h1>OAuth client “${client.name}”</h1>
<section class="card" aria-labelledby="client-details-heading">
  <h2 id="client-details-heading">Details</h2>
  <dl>
    <dt>Client ID</dt><dd><code>${client.client_id}</code></dd>
    <dt>Type</dt><dd>${typeName(client)}</dd>
    <dt>Created</dt><dd>${dateTime(client.created_at)}</dd>
  </dl>
  <p><a href="${INTEGRATIONS_PATH}#oauth-clients">Back to Integrations</a></p>
</section>
<section class="card" aria-labelledby="rotate-secret-heading">
  <h2 id="rotate-secret-heading">Client secret</h2>
  ${rotateSecretForm(client, signedIn.csrfToken)}
</section>
<section class="card" aria-labelledby="grants-heading">
  <h2 id="grants-heading">Users who granted access</h2>
  <p>Revoking a grant ends its refresh and access tokens at once; the person must approve the app again.</p>
  ${grantsTable(client, grants, signedIn.csrfToken)}
</section>`,
  };
}
