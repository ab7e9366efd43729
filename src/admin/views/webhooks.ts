import type { AuditEventRow } from '../../db/repositories/audit-events.ts';
import { html, type SafeHtml } from '../../lib/html.ts';
import { endpointPath, WEBHOOKS_PATH } from '../../paths.ts';
import {
  ATTEMPTS_SHOWN,
  DEFAULT_OVERLAP_HOURS,
  OUTCOME_FILTERS,
  type StuckEvent,
  type WebhookAttemptView,
  type WebhookEndpointView,
} from '../../services/webhook-service.ts';
import { EVENT_TYPES, RECORD_EVENT_KINDS } from '../../webhooks/events.ts';
import { actorName } from './api-keys.ts';
import { dateTime } from './format.ts';
import { csrfField, type Page, type SignedIn } from './layout.ts';

/** The value the "restart from latest" confirmation posts; anything else enables without skipping. */
export const FROM_LATEST_CONFIRMED = 'confirmed';

export { endpointPath };

export type EndpointWithAttempts = WebhookEndpointView & { attempts: WebhookAttemptView[] };

const STATE_NAMES: Record<WebhookEndpointView['state'], string> = {
  active: 'Active',
  disabled: 'Disabled',
};

const ACTION_NAMES: Record<string, string> = {
  created: 'Created',
  updated: 'Edited',
  disabled: 'Disabled',
  enabled: 'Enabled',
  deleted: 'Deleted',
  'secret rotated': 'Rotated the secret',
  resend: 'Resend',
  redelivered: 'Redelivered an event',
  skipped: 'Skipped an event',
};

/** The delivery log's filter by outcome, in words. */
const OUTCOME_NAMES: Record<string, string> = {
  success: 'Succeeded (2xx)',
  failure: 'Failed (any reason)',
  http_error: 'Failed: an HTTP error status',
  gone: 'Failed: 410 Gone',
  timeout: 'Failed: timed out',
  network_error: 'Failed: network error',
  refused: 'Failed: address refused',
};

/** Which attempts the endpoint's page lists: its query, as given (`show` checked it). */
export interface LogFilter {
  outcome: string;
  type: string;
  /** Why the query was not applied, or null. */
  problem: string | null;
}

/** The page of one attempt of an endpoint's delivery log. */
export function attemptPath(endpointId: string, attemptId: number): string {
  return `${endpointPath(endpointId)}/attempts/${attemptId}`;
}

/** Who did something to an endpoint: as for keys, and `system` is the delivery loop itself. */
function endpointActorName(actor: string | null, userNames: Map<string, string>): string {
  return actor === 'system' ? 'automatic (delivery)' : actorName(actor, userNames);
}

/** State in words, with what else matters (failing, past retention) as words too, never colour alone. */
function stateBadges(endpoint: WebhookEndpointView): SafeHtml {
  const failing =
    endpoint.failing_since !== null ? html` <span class="badge badge-warning">Failing</span>` : null;
  const past = endpoint.past_retention
    ? html` <span class="badge badge-warning">Past retention</span>`
    : null;
  return html`<span class="badge badge-${endpoint.state}">${STATE_NAMES[endpoint.state]}</span>${failing}${past}`;
}

function lastDelivery(endpoint: WebhookEndpointView): SafeHtml {
  if (endpoint.last_attempt_at === null) return html`Never`;
  const answer = endpoint.last_status === null ? 'no answer' : `HTTP ${endpoint.last_status}`;
  return html`${dateTime(endpoint.last_attempt_at)}: ${answer}`;
}

function lagText(lag: number): string {
  return `${lag} ${lag === 1 ? 'change' : 'changes'}`;
}

function eventsText(events: string[]): SafeHtml {
  return html`${events.map((event, i) => html`${i === 0 ? null : ', '}<code>${event}</code>`)}`;
}

function endpointTable(endpoints: WebhookEndpointView[]): SafeHtml {
  if (endpoints.length === 0) return html`<p>No webhook endpoints yet.</p>`;
  const rows = endpoints.map(
    (endpoint) => html`<tr data-endpoint-id="${endpoint.id}">
  <td data-label="URL"><a href="${endpointPath(endpoint.id)}"><code>${endpoint.url}</code></a>${
    endpoint.description === null ? null : html`<br><span class="muted">${endpoint.description}</span>`
  }</td>
  <td data-label="Events">${eventsText(endpoint.events)}</td>
  <td data-label="State">${stateBadges(endpoint)}</td>
  <td data-label="Lag">${lagText(endpoint.lag)}</td>
  <td data-label="Last delivery">${lastDelivery(endpoint)}</td>
</tr>`,
  );
  return html`<div class="table-wrap"><table class="responsive" id="webhooks-table">
  <caption class="visually-hidden">Webhook endpoints</caption>
  <thead><tr><th scope="col">URL</th><th scope="col">Events</th><th scope="col">State</th><th scope="col">Lag</th><th scope="col">Last delivery</th></tr></thead>
  <tbody>${rows}</tbody>
</table></div>`;
}

/**
 * The URL, events and description fields, shared by the form that adds an endpoint and the one that
 * edits it (`values`: the endpoint's own; the field ids then say `edit`).
 */
function endpointFields(values: WebhookEndpointView | null): SafeHtml {
  const wildcards = RECORD_EVENT_KINDS.map((kind) => `${kind}.*`).join(', ');
  const prefix = values === null ? 'webhook' : 'edit-webhook';
  const urlHint =
    values === null
      ? 'An https:// address on the public internet. It receives one signed POST per change made after it is added.'
      : 'An https:// address on the public internet, checked as a new one is. The next delivery goes there.';
  return html`<label for="${prefix}-url">URL</label>
  <input id="${prefix}-url" name="url" type="url" required maxlength="2048" placeholder="https://example.com/hooks/safety" spellcheck="false" autocomplete="off" aria-describedby="${prefix}-url-hint" value="${values?.url ?? ''}">
  <p id="${prefix}-url-hint" class="hint">${urlHint}</p>
  <label for="${prefix}-events">Events</label>
  <input id="${prefix}-events" name="events" type="text" value="${values === null ? '*' : values.events.join(', ')}" spellcheck="false" autocomplete="off" aria-describedby="${prefix}-events-hint">
  <p id="${prefix}-events-hint" class="hint">Comma-separated: <code>*</code> for every event, a kind (${wildcards}), or event types: ${EVENT_TYPES.join(', ')}.</p>
  <label for="${prefix}-description">Description <span class="muted">(optional)</span></label>
  <input id="${prefix}-description" name="description" type="text" maxlength="200" placeholder="e.g. Data warehouse sync" value="${values?.description ?? ''}">`;
}

function createForm(csrfToken: string): SafeHtml {
  return html`<form method="post" action="${WEBHOOKS_PATH}" class="stack action-form" aria-labelledby="create-webhook-heading">
  <h2 id="create-webhook-heading">Add an endpoint</h2>
  ${csrfField(csrfToken)}
  ${endpointFields(null)}
  <button type="submit" class="button button-primary">Add endpoint</button>
</form>`;
}

export function webhooksPage(options: { signedIn: SignedIn; endpoints: WebhookEndpointView[] }): Page {
  const { signedIn, endpoints } = options;
  return {
    title: 'Webhooks',
    trail: ['Integrations', 'Webhooks'],
    signedIn,
    body: html`<h1>Webhooks</h1>
<section class="card" aria-labelledby="webhooks-heading">
  <h2 id="webhooks-heading">Endpoints</h2>
  <p>Each endpoint receives this account's changes (incidents, users, departments, locations) as signed HTTPS POSTs, in order, and is retried until it answers with a 2xx. The lag is how many changes it has not received yet.</p>
  ${endpointTable(endpoints)}
</section>
<section class="card">
  ${createForm(signedIn.csrfToken)}
</section>`,
  };
}

function pastRetentionNotice(endpoint: WebhookEndpointView): SafeHtml | null {
  if (!endpoint.past_retention) return null;
  return html`<section class="card notice" id="past-retention" aria-labelledby="past-retention-heading">
  <h2 id="past-retention-heading">Past the feed's retention</h2>
  <p class="warning">This endpoint stopped at a position older than the changes feed keeps (CHANGES_RETENTION_DAYS), so deletions made since may be gone from the feed. It cannot resume where it stopped: it can only restart from the latest change, and the changes made while it was stopped are not sent. The receiver should sync again from an export.</p>
</section>`;
}

function detailsSection(endpoint: WebhookEndpointView, userNames: Map<string, string>): SafeHtml {
  return html`<section class="card" aria-labelledby="webhook-details-heading">
  <h2 id="webhook-details-heading">Details</h2>
  <dl class="details">
    <dt>URL</dt><dd><code>${endpoint.url}</code></dd>
    <dt>Description</dt><dd>${endpoint.description ?? 'None'}</dd>
    <dt>Events</dt><dd>${eventsText(endpoint.events)}</dd>
    <dt>State</dt><dd id="webhook-state">${stateBadges(endpoint)}</dd>
    <dt>Disabled because</dt><dd id="webhook-disabled-reason">${endpoint.disabled_reason ?? 'Not disabled'}</dd>
    <dt>Failing since</dt><dd id="webhook-failing-since">${dateTime(endpoint.failing_since, 'Not failing')}</dd>
    <dt>Next attempt</dt><dd id="webhook-next-attempt">${dateTime(endpoint.next_attempt_at, 'None scheduled')}</dd>
    <dt>Lag</dt><dd id="webhook-lag">${lagText(endpoint.lag)} not delivered yet</dd>
    <dt>Cursor</dt><dd><code id="webhook-cursor">${endpoint.cursor}</code></dd>
    <dt>Last delivery</dt><dd>${lastDelivery(endpoint)}</dd>
    <dt>Previous secrets</dt><dd>${
      endpoint.previous_secrets_expire_at.length === 0
        ? 'None: only the current secret signs'
        : html`Each also signs until its own expiry: ${endpoint.previous_secrets_expire_at.map((at, i) => html`${i === 0 ? '' : ', '}${dateTime(at)}`)}`
    }</dd>
    <dt>Created by</dt><dd>${endpointActorName(endpoint.created_by, userNames)}</dd>
    <dt>Created</dt><dd>${dateTime(endpoint.created_at)}</dd>
  </dl>
</section>`;
}

function stateForm(endpoint: WebhookEndpointView, csrfToken: string): SafeHtml {
  const path = endpointPath(endpoint.id);
  if (endpoint.state === 'active') {
    return html`<form method="post" action="${path}/disable" class="stack action-form">
    ${csrfField(csrfToken)}
    <p class="hint">Nothing is sent while it is disabled; its position is kept, so enabling it resumes where it stopped.</p>
    <button type="submit" class="button">Disable endpoint</button>
  </form>`;
  }
  if (endpoint.past_retention) {
    return html`<p><a class="button" href="${path}/enable">Enable and restart from latest…</a></p>`;
  }
  return html`<form method="post" action="${path}/enable" class="stack action-form">
    ${csrfField(csrfToken)}
    <p class="hint">Deliveries resume after the last change it received.</p>
    <button type="submit" class="button">Enable endpoint</button>
  </form>`;
}

/** While the endpoint fails on an event: which one, and the button that passes it. */
function skipForm(
  endpoint: WebhookEndpointView,
  stuck: StuckEvent | null,
  csrfToken: string,
): SafeHtml | null {
  if (stuck === null) return null;
  const path = endpointPath(endpoint.id);
  return html`<h3 id="webhook-skip-heading">Skip the event it is stuck on</h3>
  <form method="post" action="${path}/skip" class="stack action-form" aria-labelledby="webhook-skip-heading">
    ${csrfField(csrfToken)}
    <p id="webhook-stuck">Failing on <code>${stuck.webhook_id}</code>: <code>${stuck.type}</code> of <code>${stuck.record_id}</code> (seq ${stuck.seq}).</p>
    <p class="hint">Its position moves just past this event, which is never sent (it counts as sent, as an event the filter leaves out does), and the next event is tried at once. The receiver can read the record from the API.</p>
    <button type="submit" class="button">Skip this event</button>
  </form>`;
}

function actionsSection(
  endpoint: WebhookEndpointView,
  stuck: StuckEvent | null,
  csrfToken: string,
): SafeHtml {
  const path = endpointPath(endpoint.id);
  return html`<section class="card" aria-labelledby="webhook-actions-heading">
  <h2 id="webhook-actions-heading">Actions</h2>
  ${skipForm(endpoint, stuck, csrfToken)}
  <h3 id="webhook-edit-heading">Edit</h3>
  <form method="post" action="${path}/update" class="stack action-form" aria-labelledby="webhook-edit-heading">
    ${csrfField(csrfToken)}
    ${endpointFields(endpoint)}
    <p class="hint">The secret, the position and the state stay: deliveries go on after the last change it received.</p>
    <button type="submit" class="button">Save changes</button>
  </form>
  <h3 id="webhook-test-heading">Send a test event</h3>
  <form method="post" action="${path}/test" class="stack action-form" aria-labelledby="webhook-test-heading">
    ${csrfField(csrfToken)}
    <p class="hint">Sends a signed <code>webhook.test</code> event now, whatever the endpoint's state, and shows what the receiver answered. It is recorded in the delivery log.</p>
    <button type="submit" class="button">Send test event</button>
  </form>
  <h3 id="webhook-state-heading">${endpoint.state === 'active' ? 'Stop deliveries' : 'Resume deliveries'}</h3>
  ${stateForm(endpoint, csrfToken)}
  <h3 id="webhook-resend-heading">Resend from a cursor</h3>
  <form method="post" action="${path}/resend" class="stack action-form" aria-labelledby="webhook-resend-heading">
    ${csrfField(csrfToken)}
    <label for="resend-cursor">Cursor</label>
    <input id="resend-cursor" name="cursor" type="text" required spellcheck="false" autocomplete="off" aria-describedby="resend-cursor-hint">
    <p id="resend-cursor-hint" class="hint">Every change after this position is sent again, in order, with the same <code>webhook-id</code> as the first time. Paste a <code>data.cursor</code> from an event the receiver stored, or a cursor from <code>/changes</code>; <code>latest</code> skips everything not yet sent.</p>
    <button type="submit" class="button">Resend</button>
  </form>
  <h3 id="webhook-rotate-heading">Rotate the signing secret</h3>
  <form method="post" action="${path}/rotate-secret" class="stack action-form" aria-labelledby="webhook-rotate-heading">
    ${csrfField(csrfToken)}
    <label for="rotate-overlap">Overlap in hours</label>
    <input id="rotate-overlap" name="overlap_hours" type="number" min="0" max="720" step="any" inputmode="decimal" value="${DEFAULT_OVERLAP_HOURS}" aria-describedby="rotate-overlap-hint">
    <p id="rotate-overlap-hint" class="hint">The new secret is shown once. During the overlap the current secret signs too (a signature per secret in each message), so the receiver can switch without missing an event; secrets replaced earlier keep their own expiry; 0 ends every earlier secret now.</p>
    <button type="submit" class="button">Rotate secret</button>
  </form>
  <h3 id="webhook-delete-heading">Delete</h3>
  <p><a class="button button-danger" href="${path}/delete">Delete endpoint…</a></p>
</section>`;
}

function statusText(attempt: WebhookAttemptView): SafeHtml {
  const ok = attempt.status !== null && attempt.status >= 200 && attempt.status < 300;
  const answer = attempt.status === null ? 'No answer' : `HTTP ${attempt.status}`;
  return ok ? html`${answer}` : html`${answer} <span class="badge badge-failed">Failed</span>`;
}

function logFilterForm(endpoint: WebhookEndpointView, filter: LogFilter): SafeHtml {
  const path = endpointPath(endpoint.id);
  const filtered = filter.problem === null && (filter.outcome !== '' || filter.type !== '');
  return html`<form method="get" action="${path}" class="inline-form" aria-label="Filter the delivery log">
    <label for="log-outcome">Outcome</label>
    <select id="log-outcome" name="outcome">
      <option value=""${filter.outcome === '' ? html` selected` : null}>Any</option>
      ${OUTCOME_FILTERS.map(
        (outcome) =>
          html`<option value="${outcome}"${filter.outcome === outcome ? html` selected` : null}>${OUTCOME_NAMES[outcome] ?? outcome}</option>`,
      )}
    </select>
    <label for="log-type">Event type</label>
    <input id="log-type" name="type" type="text" value="${filter.type}" placeholder="incident.*" spellcheck="false" autocomplete="off" aria-describedby="log-type-hint">
    <button type="submit" class="button">Filter</button>
    ${filtered ? html`<a href="${path}">Show every attempt</a>` : null}
  </form>
  <p id="log-type-hint" class="hint">Types or wildcards, comma-separated, as for the endpoint's events: <code>incident.created</code>, <code>user.*</code>, <code>webhook.test</code>.</p>
  ${filter.problem === null ? null : html`<p class="warning" role="alert">The filter was not applied: ${filter.problem}.</p>`}`;
}

function attemptsSection(endpoint: EndpointWithAttempts, filter: LogFilter): SafeHtml {
  const { attempts } = endpoint;
  const filtered = filter.problem === null && (filter.outcome !== '' || filter.type !== '');
  const body =
    attempts.length === 0
      ? html`<p>${filtered ? 'No attempt in the log matches this filter.' : 'No delivery attempts yet.'}</p>`
      : html`<div class="table-wrap"><table class="responsive" id="webhook-attempts-table">
  <caption class="visually-hidden">Last ${attempts.length} delivery attempts${filtered ? ' that match the filter' : ''}, newest first</caption>
  <thead><tr><th scope="col">At</th><th scope="col">Webhook id</th><th scope="col">Type</th><th scope="col">Status</th><th scope="col">Duration</th><th scope="col">Error</th><th scope="col">Request and response</th></tr></thead>
  <tbody>${attempts.map(
    (attempt) => html`<tr>
  <td data-label="At">${dateTime(attempt.at)}</td>
  <td data-label="Webhook id"><code>${attempt.webhook_id}</code></td>
  <td data-label="Type"><code>${attempt.type}</code></td>
  <td data-label="Status">${statusText(attempt)}</td>
  <td data-label="Duration">${attempt.duration_ms} ms</td>
  <td data-label="Error">${attempt.error ?? ''}</td>
  <td data-label="Detail"><a href="${attemptPath(endpoint.id, attempt.id)}">Details<span class="visually-hidden"> of attempt ${attempt.id}</span></a></td>
</tr>`,
  )}</tbody>
</table></div>`;
  return html`<section class="card" aria-labelledby="webhook-attempts-heading">
  <h2 id="webhook-attempts-heading">Delivery log</h2>
  <p>The last ${ATTEMPTS_SHOWN} attempts${filtered ? ' that match the filter' : ''}, newest first. The log keeps the last 1,000 attempts of the last 30 days (4 MiB at most), each with its request and response: open one to see them, or to send its event again.</p>
  ${logFilterForm(endpoint, filter)}
  ${body}
</section>`;
}

/** Headers as a definition list, in the order they were kept. */
function headerList(headers: Record<string, string | string[]>, id: string): SafeHtml {
  const entries = Object.entries(headers);
  if (entries.length === 0) return html`<p id="${id}">None.</p>`;
  return html`<dl class="details" id="${id}">${entries.map(
    ([name, value]) =>
      html`<dt><code>${name}</code></dt><dd><code>${Array.isArray(value) ? value.join(', ') : value}</code></dd>`,
  )}</dl>`;
}

/** A body as it was sent or received, pretty-printed when it is JSON. */
function payload(body: string, id: string, label: string): SafeHtml {
  if (body === '') return html`<p id="${id}">Empty.</p>`;
  let shown = body;
  try {
    shown = JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    // Not JSON (or cut at 4 KiB): shown as it came.
  }
  return html`<pre class="payload" id="${id}" tabindex="0" aria-label="${label}"><code>${shown}</code></pre>`;
}

export function attemptPage(options: {
  signedIn: SignedIn;
  endpoint: WebhookEndpointView;
  attempt: WebhookAttemptView;
}): Page {
  const { signedIn, endpoint, attempt } = options;
  const path = endpointPath(endpoint.id);
  const request = attempt.request;
  const response = attempt.response;
  return {
    title: `Delivery attempt ${attempt.id} of webhook ${endpoint.url}`,
    trail: ['Integrations', 'Webhooks', endpoint.url, `Attempt ${attempt.id}`],
    signedIn,
    body: html`<p><a href="${path}">← Back to the endpoint</a></p>
<h1>Delivery attempt <code>${attempt.webhook_id}</code></h1>
<section class="card" aria-labelledby="attempt-summary-heading">
  <h2 id="attempt-summary-heading">Summary</h2>
  <dl class="details">
    <dt>Endpoint</dt><dd><code>${endpoint.url}</code></dd>
    <dt>Event type</dt><dd><code>${attempt.type}</code></dd>
    <dt>Seq</dt><dd>${attempt.seq === null ? 'None (a test event)' : String(attempt.seq)}</dd>
    <dt>At</dt><dd>${dateTime(attempt.at)}</dd>
    <dt>Duration</dt><dd>${attempt.duration_ms} ms</dd>
    <dt>Outcome</dt><dd id="attempt-outcome">${statusText(attempt)} <span class="muted">(${attempt.outcome})</span></dd>
    <dt>Error</dt><dd>${attempt.error ?? 'None'}</dd>
  </dl>
</section>
<section class="card" aria-labelledby="attempt-request-heading">
  <h2 id="attempt-request-heading">Request</h2>
  ${
    request === null
      ? html`<p>Not kept: this attempt was logged before the delivery log kept requests.</p>`
      : html`<p>A <code>POST</code> to the endpoint's URL, with these headers. The signature was made with the endpoint's secret, which is never shown.</p>
  ${headerList(request.headers, 'attempt-request-headers')}
  <h3 id="attempt-request-body-heading">Body</h3>
  ${payload(request.body, 'attempt-request-body', 'Request body')}`
  }
</section>
<section class="card" aria-labelledby="attempt-response-heading">
  <h2 id="attempt-response-heading">Response</h2>
  ${
    response === null
      ? html`<p>${request === null ? 'Not kept.' : `No answer came: ${attempt.error ?? 'no answer'}.`}</p>`
      : html`<p id="attempt-response-status">HTTP ${response.status}</p>
  ${headerList(response.headers, 'attempt-response-headers')}
  <h3 id="attempt-response-body-heading">Body <span class="muted">(the first 4 KiB)</span></h3>
  ${payload(response.body, 'attempt-response-body', 'Response body')}`
  }
</section>
${
  request === null
    ? null
    : html`<section class="card" aria-labelledby="attempt-redeliver-heading">
  <h2 id="attempt-redeliver-heading">Redeliver</h2>
  <form method="post" action="${path}/redeliver" class="stack action-form" aria-labelledby="attempt-redeliver-heading">
    ${csrfField(signedIn.csrfToken)}
    <input type="hidden" name="webhook_id" value="${attempt.webhook_id}">
    <p class="hint">Sends this event again now, whatever the endpoint's state: the same <code>webhook-id</code> and body, a new timestamp and signature. It is recorded in the delivery log; the endpoint's position does not move.</p>
    <button type="submit" class="button">Redeliver this event</button>
  </form>
</section>`
}`,
  };
}

function historySection(events: AuditEventRow[], userNames: Map<string, string>): SafeHtml {
  const body =
    events.length === 0
      ? html`<p>No changes recorded yet.</p>`
      : html`<div class="table-wrap"><table class="responsive" id="webhook-history-table">
  <caption class="visually-hidden">Changes to this endpoint, newest first</caption>
  <thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">Action</th><th scope="col">Details</th></tr></thead>
  <tbody>${events.map(
    (event) => html`<tr>
  <td data-label="When">${dateTime(event.created_at)}</td>
  <td data-label="Who">${endpointActorName(event.actor, userNames)}</td>
  <td data-label="Action">${ACTION_NAMES[event.action] ?? event.action}</td>
  <td data-label="Details">${event.detail ?? ''}</td>
</tr>`,
  )}</tbody>
</table></div>`;
  return html`<section class="card" aria-labelledby="webhook-history-heading">
  <h2 id="webhook-history-heading">History</h2>
  ${body}
</section>`;
}

export function webhookPage(options: {
  signedIn: SignedIn;
  endpoint: EndpointWithAttempts;
  history: AuditEventRow[];
  userNames: Map<string, string>;
  /** The event it is stuck on while failing, or null. */
  stuck: StuckEvent | null;
  filter: LogFilter;
}): Page {
  const { signedIn, endpoint, history, userNames, stuck, filter } = options;
  return {
    title: `Webhook ${endpoint.url}`,
    trail: ['Integrations', 'Webhooks', endpoint.url],
    signedIn,
    body: html`<p><a href="${WEBHOOKS_PATH}">← All webhook endpoints</a></p>
<h1>Webhook endpoint <code>${endpoint.url}</code></h1>
${pastRetentionNotice(endpoint)}
${detailsSection(endpoint, userNames)}
${actionsSection(endpoint, stuck, signedIn.csrfToken)}
${attemptsSection(endpoint, filter)}
${historySection(history, userNames)}`,
  };
}

export function deleteConfirmationPage(options: { signedIn: SignedIn; endpoint: WebhookEndpointView }): Page {
  const { signedIn, endpoint } = options;
  const path = endpointPath(endpoint.id);
  return {
    title: `Delete webhook ${endpoint.url}`,
    trail: ['Integrations', 'Webhooks', endpoint.url, 'Delete'],
    signedIn,
    body: html`<section class="card message" aria-labelledby="delete-webhook-heading">
  <h1 id="delete-webhook-heading">Delete webhook endpoint <code>${endpoint.url}</code>?</h1>
  <p class="warning">Deleting is permanent. Nothing more is sent to this URL, and its delivery log and position are gone; ${lagText(endpoint.lag)} not delivered yet will never be sent to it.</p>
  <form method="post" action="${path}/delete" class="actions">
    ${csrfField(signedIn.csrfToken)}
    <button type="submit" class="button button-danger">Delete permanently</button>
    <a class="button button-quiet" href="${path}">Cancel</a>
  </form>
</section>`,
  };
}

/** Enabling an endpoint whose position the feed no longer holds: a deliberate restart from the head. */
export function restartConfirmationPage(options: {
  signedIn: SignedIn;
  endpoint: WebhookEndpointView;
}): Page {
  const { signedIn, endpoint } = options;
  const path = endpointPath(endpoint.id);
  return {
    title: `Restart webhook ${endpoint.url}`,
    trail: ['Integrations', 'Webhooks', endpoint.url, 'Restart from latest'],
    signedIn,
    body: html`<section class="card message" aria-labelledby="restart-webhook-heading">
  <h1 id="restart-webhook-heading">Enable <code>${endpoint.url}</code> from the latest change?</h1>
  <p class="warning">This endpoint stopped at a position older than the changes feed keeps. Enabling it restarts it from the latest change: the changes made while it was stopped, deletions included, are never sent to it, so the receiver should sync again from an export.</p>
  <form method="post" action="${path}/enable" class="stack action-form">
    ${csrfField(signedIn.csrfToken)}
    <div class="inline-form">
      <input id="restart-confirm" name="from_latest" type="checkbox" value="${FROM_LATEST_CONFIRMED}" required>
      <label for="restart-confirm">I understand that the changes made while it was stopped are not sent</label>
    </div>
    <div class="actions">
      <button type="submit" class="button button-danger">Enable and restart from latest</button>
      <a class="button button-quiet" href="${path}">Cancel</a>
    </div>
  </form>
</section>`,
  };
}
