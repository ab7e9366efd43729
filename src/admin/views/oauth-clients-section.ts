import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { oauthClientService } from '../../oauth/clients.ts';
import { html, type SafeHtml } from '../html.ts';
import { dateTime } from './format.ts';

/**
 * The "OAuth clients" section of Settings > Integrations: the partner apps registered for the
 * account. Registration and deletion are done with `safety-api oauth-clients` for now.
 */
export async function oauthClientsSection(db: Kysely<Database>, accountId: string): Promise<SafeHtml> {
  const clients = await oauthClientService.list(db, accountId);
  const list =
    clients.length === 0
      ? html`<p>No OAuth clients registered.</p>`
      : html`<div class="table-wrap"><table class="responsive" id="oauth-clients-table">
  <thead><tr><th scope="col">Name</th><th scope="col">Client ID</th><th scope="col">Type</th><th scope="col">Redirect URIs</th><th scope="col">Created</th></tr></thead>
  <tbody>${clients.map(
    (client) => html`<tr>
    <td>${client.name}</td>
    <td><code>${client.client_id}</code></td>
    <td>${client.type === 'public' ? 'Public (PKCE, no secret)' : 'Confidential'}</td>
    <td>${client.redirect_uris.map((uri) => html`<code>${uri}</code><br>`)}</td>
    <td>${dateTime(client.created_at)}</td>
  </tr>`,
  )}</tbody>
</table></div>`;
  return html`<section class="card" aria-labelledby="oauth-clients-heading">
  <h2 id="oauth-clients-heading">OAuth clients</h2>
  ${list}
  <p class="muted">Register or delete a partner app with <code>safety-api oauth-clients create|delete</code>; a client secret is shown once, at creation.</p>
</section>`;
}
