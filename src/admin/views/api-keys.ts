import { API_KEY_SCOPES, type ApiKeyScope } from '../../auth/api-keys.ts';
import type { AuditEventRow } from '../../db/repositories/audit-events.ts';
import { AUDIT_PATH, INTEGRATIONS_PATH, KEYS_PATH, keyPath } from '../../paths.ts';
import {
  type ApiKeyView,
  KEY_LIST_STATES,
  KEYS_PER_PAGE,
  type KeyListRequest,
  ROLL_OVERLAPS,
  type RollOverlap,
} from '../../services/api-key-service.ts';
import type { UsageHour, UsageTotals } from '../../services/key-usage-service.ts';
import { html, type SafeHtml } from '../../lib/html.ts';
import { count, dateTime } from './format.ts';
import { csrfField, type Page, type SignedIn } from './layout.ts';

const EXPIRY_WARNING_MS = 7 * 24 * 3600 * 1000;

export { keyPath };

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
  rolled: 'Rolled',
  created_by_roll: 'Created by roll',
};

/** The list filter's choices, in the words of the state badges. */
const FILTER_NAMES: Record<KeyListRequest['state'] & string, string> = {
  active: 'Active',
  disabled: 'Disabled',
  expiring: 'Expiring within 7 days',
  expired: 'Expired',
  revoked: 'Revoked',
};

const OVERLAP_NAMES: Record<RollOverlap, string> = {
  now: 'Now (the old key stops at once)',
  '1h': 'In 1 hour',
  '24h': 'In 24 hours',
  '7d': 'In 7 days',
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

/** The list's address for `request` (page 1 and the defaults left out, so the plain page is the first). */
export function keyListHref(request: KeyListRequest): string {
  const query = new URLSearchParams();
  if (request.search !== '') query.set('q', request.search);
  if (request.state !== null) query.set('state', request.state);
  if (request.sort !== 'created') query.set('sort', request.sort);
  if (request.page > 1) query.set('page', String(request.page));
  const search = query.toString();
  return `${INTEGRATIONS_PATH}${search === '' ? '' : `?${search}`}#api-keys`;
}

function findForm(request: KeyListRequest): SafeHtml {
  const option = (value: string, label: string, selected: boolean) =>
    html`<option value="${value}"${selected ? html` selected` : null}>${label}</option>`;
  return html`<form method="get" action="${INTEGRATIONS_PATH}#api-keys" class="find-keys inline-form" role="search" aria-label="Find keys">
  <label for="find-q">Name or prefix</label>
  <input id="find-q" name="q" type="search" maxlength="100" value="${request.search}">
  <label for="find-state">State</label>
  <select id="find-state" name="state">${[
    option('', 'All states', request.state === null),
    ...KEY_LIST_STATES.map((state) => option(state, FILTER_NAMES[state], request.state === state)),
  ]}</select>
  <label for="find-sort">Sort by</label>
  <select id="find-sort" name="sort">${[
    option('created', 'Newest first', request.sort === 'created'),
    option('last_used', 'Last used', request.sort === 'last_used'),
  ]}</select>
  <button type="submit" class="button">Find keys</button>
</form>`;
}

function pageLinks(request: KeyListRequest, total: number, pages: number): SafeHtml {
  const first = total === 0 ? 0 : (request.page - 1) * KEYS_PER_PAGE + 1;
  const last = Math.min(total, request.page * KEYS_PER_PAGE);
  const link = (page: number, label: string, rel: string) =>
    html`<a href="${keyListHref({ ...request, page })}" rel="${rel}">${label}</a>`;
  const links = [
    request.page > 1 ? html`<li>${link(request.page - 1, 'Previous page', 'prev')}</li>` : null,
    request.page < pages ? html`<li>${link(request.page + 1, 'Next page', 'next')}</li>` : null,
  ].filter((item) => item !== null);
  return html`<nav aria-label="Pages of API keys" class="key-pages">
  <p id="key-count">Keys ${count(first)}–${count(last)} of ${count(total)} · page ${count(request.page)} of ${count(pages)}</p>
  ${links.length === 0 ? null : html`<ul>${links}</ul>`}
</nav>`;
}

function keyTable(
  keys: ApiKeyView[],
  userNames: Map<string, string>,
  now: Date,
  filtered: boolean,
): SafeHtml {
  if (keys.length === 0) return html`<p>${filtered ? 'No API keys match.' : 'No API keys yet.'}</p>`;
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
  return html`<h3 id="audit-heading">Audit trail</h3>${body}
<p><a href="${AUDIT_PATH}?subject_type=api_key">Every API key event</a>, with filters and a CSV download.</p>`;
}

export function integrationsPage(options: {
  signedIn: SignedIn;
  list: { keys: ApiKeyView[]; total: number; pages: number; request: KeyListRequest };
  /** Names of the keys the events are about. */
  keyNames: Map<string, string>;
  events: AuditEventRow[];
  userNames: Map<string, string>;
  oauthClients: SafeHtml;
  now: Date;
}): Page {
  const { signedIn, list, keyNames, events, userNames, now } = options;
  const filtered = list.request.search !== '' || list.request.state !== null;
  return {
    title: 'Integrations',
    trail: ['Integrations'],
    signedIn,
    body: html`<h1>Integrations</h1>
<section class="card" id="api-keys" aria-labelledby="api-keys-heading">
  <h2 id="api-keys-heading">API keys</h2>
  <p>Keys give integrations read access to this account's data through the public API. Every change takes effect at the key's next request.</p>
  ${findForm(list.request)}
  ${pageLinks(list.request, list.total, list.pages)}
  ${keyTable(list.keys, userNames, now, filtered)}
  ${createForm(signedIn.csrfToken)}
  ${auditTrail(events, keyNames, userNames)}
</section>
${options.oauthClients}`,
  };
}

function relatedKey(id: string | null, names: Map<string, string>): SafeHtml | null {
  if (id === null) return null;
  return html`<a href="${keyPath(id)}">${names.get(id) ?? id}</a>`;
}

function rollForm(key: ApiKeyView, path: string, token: string): SafeHtml {
  if (key.state !== 'active' || key.rolled_to !== null) {
    return html`<p>Only an active key that was not rolled yet can be rolled.</p>`;
  }
  const choices = (Object.keys(ROLL_OVERLAPS) as RollOverlap[]).map(
    (
      overlap,
    ) => html`<div class="choice"><input type="radio" id="overlap-${overlap}" name="overlap" value="${overlap}"${overlap === '24h' ? html` checked` : null}>
    <label for="overlap-${overlap}">${OVERLAP_NAMES[overlap]}</label></div>`,
  );
  return html`<p>Rolling creates a new key with the same scope and expiry and shows it once. The old key keeps working until the time you choose, so you can deploy the new one without an outage.</p>
  <form method="post" action="${path}/roll" class="stack">
    ${csrfField(token)}
    <fieldset>
      <legend>The old key stops working</legend>
      ${choices}
    </fieldset>
    <button type="submit" class="button">Roll key</button>
  </form>`;
}

export interface KeyUsageSummary {
  hours: UsageHour[];
  totals: { day: UsageTotals; week: UsageTotals; month: UsageTotals };
}

const CLASSES = [
  { field: 'ok', label: 'Successful', pattern: 'usage-ok' },
  { field: 'client_errors', label: 'Client errors', pattern: 'usage-client-errors' },
  { field: 'rate_limited', label: 'Rate limited', pattern: 'usage-rate-limited' },
] as const;

const CHART_HEIGHT = 160;
const CHART_LEFT = 1;
const CHART_TOP = 10;
const CHART_BOTTOM = 1;

/**
 * The patterns tell the classes apart without colour: solid, dense stripes and sparse stripes, each
 * also in its own colour of a different lightness, and named in the legend beside a sample of each.
 * The stripes are horizontal, so that they still show in bars one hour (about a pixel) wide.
 */
function chartPatterns(): SafeHtml {
  return html`<defs>
    <pattern id="usage-ok" width="4" height="4" patternUnits="userSpaceOnUse"><rect width="4" height="4" fill="#1d6b3a"/></pattern>
    <pattern id="usage-client-errors" width="4" height="4" patternUnits="userSpaceOnUse"><rect width="4" height="4" fill="#f5d0b5"/><rect width="4" height="2" fill="#a3470b"/></pattern>
    <pattern id="usage-rate-limited" width="4" height="8" patternUnits="userSpaceOnUse"><rect width="4" height="8" fill="#e3d5f0"/><rect width="4" height="2" fill="#5b2a86"/></pattern>
  </defs>`;
}

function usageChart(hours: UsageHour[]): SafeHtml {
  const max = Math.max(1, ...hours.map((hour) => hour.ok + hour.client_errors + hour.rate_limited));
  const width = CHART_LEFT + hours.length;
  const height = CHART_TOP + CHART_HEIGHT + CHART_BOTTOM;
  const baseline = CHART_TOP + CHART_HEIGHT;
  const bars: SafeHtml[] = [];
  hours.forEach((hour, index) => {
    let y = baseline;
    for (const kind of CLASSES) {
      const value = hour[kind.field];
      if (value === 0) continue;
      const barHeight = (value / max) * CHART_HEIGHT;
      y -= barHeight;
      bars.push(
        html`<rect x="${CHART_LEFT + index}" y="${y.toFixed(2)}" width="1" height="${barHeight.toFixed(2)}" fill="url(#${kind.pattern})"/>`,
      );
    }
  });
  const first = hours[0]?.hour ?? '';
  const last = hours.at(-1)?.hour ?? '';
  // The axis labels are text of the page around the chart (not SVG text), so that they scale and
  // contrast like the rest of the page.
  return html`<figure class="usage-figure">
  <svg class="usage-chart" role="img" viewBox="0 0 ${width} ${height}" width="100%" aria-labelledby="usage-chart-title usage-chart-desc" xmlns="http://www.w3.org/2000/svg">
  <title id="usage-chart-title">Requests per hour, last 30 days</title>
  <desc id="usage-chart-desc">Stacked bars per hour from ${first.slice(0, 10)} to ${last.slice(0, 13)}:00 UTC: successful solid, client errors in dense stripes, rate limited in sparse stripes. The busiest hour had ${max} requests. The table below lists every hour with traffic.</desc>
  ${chartPatterns()}
  <line x1="${CHART_LEFT}" y1="${baseline}" x2="${width}" y2="${baseline}" stroke="#1f2933" stroke-width="1"/>
  <line x1="${CHART_LEFT}" y1="${CHART_TOP}" x2="${CHART_LEFT}" y2="${baseline}" stroke="#1f2933" stroke-width="1"/>
  ${bars}
</svg>
  <figcaption>Each bar is one hour, from ${first.slice(0, 10)} (left) to now (right); the tallest is ${count(max)} requests.</figcaption>
</figure>`;
}

function usageSection(usage: KeyUsageSummary): SafeHtml {
  const legend = CLASSES.map(
    (kind) =>
      html`<li><svg width="14" height="14" aria-hidden="true" focusable="false"><rect width="14" height="14" fill="url(#${kind.pattern})" stroke="#1f2933"/></svg> ${kind.label}</li>`,
  );
  const totalRow = (label: string, totals: UsageTotals) =>
    html`<tr><th scope="row">${label}</th>${CLASSES.map((kind) => html`<td>${count(totals[kind.field])}</td>`)}</tr>`;
  const busy = usage.hours.filter((hour) => hour.ok + hour.client_errors + hour.rate_limited > 0);
  const table =
    busy.length === 0
      ? html`<p>No requests in the last 30 days.</p>`
      : html`<div class="table-wrap"><table id="usage-hours-table">
  <caption class="visually-hidden">Requests per hour with traffic, oldest first</caption>
  <thead><tr><th scope="col">Hour (UTC)</th>${CLASSES.map((kind) => html`<th scope="col">${kind.label}</th>`)}</tr></thead>
  <tbody>${busy.map(
    (hour) =>
      html`<tr><th scope="row"><time datetime="${hour.hour}">${hour.hour.slice(0, 13).replace('T', ' ')}:00</time></th>${CLASSES.map((kind) => html`<td>${count(hour[kind.field])}</td>`)}</tr>`,
  )}</tbody>
</table></div>`;
  return html`<section class="card stack" id="usage" aria-labelledby="usage-heading">
  <h2 id="usage-heading">Usage</h2>
  <div class="table-wrap"><table id="usage-totals-table">
    <caption>Requests by outcome</caption>
    <thead><tr><th scope="col">Period</th>${CLASSES.map((kind) => html`<th scope="col">${kind.label}</th>`)}</tr></thead>
    <tbody>${totalRow('Last 24 hours', usage.totals.day)}${totalRow('Last 7 days', usage.totals.week)}${totalRow('Last 30 days', usage.totals.month)}</tbody>
  </table></div>
  ${usageChart(usage.hours)}
  <ul class="usage-legend" aria-label="Chart legend">${legend}</ul>
  <p class="hint">Successful: 2xx and 304 answers. Client errors: 4xx answers other than 429. Rate limited: 429 answers. Counts reach this page within about 10 seconds.</p>
  <details>
    <summary>Requests per hour as a table</summary>
    ${table}
  </details>
</section>`;
}

export function apiKeyPage(options: {
  signedIn: SignedIn;
  key: ApiKeyView;
  userNames: Map<string, string>;
  /** Names of the keys this one replaced or was replaced by. */
  related: Map<string, string>;
  usage: KeyUsageSummary;
  now: Date;
}): Page {
  const { signedIn, key, now, related } = options;
  const replaces = relatedKey(key.rolled_from, related);
  const replacedBy = relatedKey(key.rolled_to, related);
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
    ${replaces === null ? null : html`<dt>Replaces</dt><dd id="key-rolled-from">${replaces}</dd>`}
    ${replacedBy === null ? null : html`<dt>Replaced by</dt><dd id="key-rolled-to">${replacedBy}</dd>`}
  </dl>
  <p><a id="key-history" href="${AUDIT_PATH}?subject_type=api_key&amp;subject_id=${key.id}">This key's history</a> in the audit trail.</p>
</section>
${usageSection(options.usage)}
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
<section class="card stack" aria-labelledby="key-roll-heading">
  <h2 id="key-roll-heading">Roll</h2>
  ${rollForm(key, path, token)}
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
