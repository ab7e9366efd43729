import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { html, type SafeHtml } from '../html.ts';

/**
 * The "OAuth clients" section of Settings > Integrations. OAuth client registration (issue 4)
 * fills this in; until then no client store exists, so the honest list is an empty one.
 */
export async function oauthClientsSection(_db: Kysely<Database>, _accountId: string): Promise<SafeHtml> {
  return html`<section class="card" aria-labelledby="oauth-clients-heading">
  <h2 id="oauth-clients-heading">OAuth clients</h2>
  <p>No OAuth clients registered.</p>
</section>`;
}
