import type { AuditEventRow } from '../../db/repositories/audit-events.ts';
import { html, type SafeHtml } from '../../lib/html.ts';
import { AUDIT_PATH } from '../../paths.ts';
import {
  AUDIT_SUBJECTS,
  type AuditPage,
  type AuditQuery,
  subjectName,
} from '../../services/audit-service.ts';
import { dateTime } from './format.ts';
import type { Page, SignedIn } from './layout.ts';

/** The query string of the filter (blank fields left out), optionally with a page position. */
function queryString(query: AuditQuery, before?: number): string {
  const params = new URLSearchParams();
  for (const name of ['actor', 'subject_type', 'subject_id', 'action', 'from', 'to'] as const) {
    const value = query[name]?.trim();
    if (value !== undefined && value !== '') params.set(name, value);
  }
  if (before !== undefined) params.set('before', String(before));
  const search = params.toString();
  return search === '' ? '' : `?${search}`;
}

const option = (value: string, label: string, selected: boolean) =>
  html`<option value="${value}"${selected ? html` selected` : null}>${label}</option>`;

function filterForm(query: AuditQuery, page: AuditPage | null): SafeHtml {
  const actors = page?.actors ?? [];
  const actions = page?.actions ?? [];
  return html`<form method="get" action="${AUDIT_PATH}" class="find-keys inline-form" role="search" aria-label="Filter the audit trail">
  <label for="audit-actor">Who</label>
  <select id="audit-actor" name="actor">${[
    option('', 'Anyone', (query.actor ?? '') === ''),
    ...actors.map((actor) => option(actor.value, actor.label, query.actor === actor.value)),
  ]}</select>
  <label for="audit-subject-type">About</label>
  <select id="audit-subject-type" name="subject_type">${[
    option('', 'Anything', (query.subject_type ?? '') === ''),
    ...Object.entries(AUDIT_SUBJECTS).map(([value, label]) =>
      option(value, label, query.subject_type === value),
    ),
  ]}</select>
  <label for="audit-subject-id">Key, client or endpoint id</label>
  <input id="audit-subject-id" name="subject_id" type="text" maxlength="100" spellcheck="false" value="${query.subject_id ?? ''}">
  <label for="audit-action">Action</label>
  <select id="audit-action" name="action">${[
    option('', 'Any action', (query.action ?? '') === ''),
    ...actions.map((action) => option(action, action, query.action === action)),
  ]}</select>
  <label for="audit-from">From</label>
  <input id="audit-from" name="from" type="date" value="${query.from ?? ''}">
  <label for="audit-to">To</label>
  <input id="audit-to" name="to" type="date" value="${query.to ?? ''}">
  <button type="submit" class="button">Filter</button>
</form>`;
}

function eventTable(events: AuditEventRow[], actorNames: Map<string, string>): SafeHtml {
  if (events.length === 0) return html`<p>No events match.</p>`;
  const rows = events.map(
    (event) => html`<tr data-event-id="${String(event.id)}">
  <td data-label="When">${dateTime(event.created_at)}</td>
  <td data-label="Who">${actorNames.get(event.actor) ?? event.actor}</td>
  <td data-label="About">${subjectName(event.subject_type)} <code>${event.subject_id}</code></td>
  <td data-label="Action">${event.action}</td>
  <td data-label="Details">${event.detail ?? ''}</td>
</tr>`,
  );
  return html`<div class="table-wrap"><table class="responsive" id="audit-events-table">
  <caption class="visually-hidden">Audit events, newest first</caption>
  <thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">About</th><th scope="col">Action</th><th scope="col">Details</th></tr></thead>
  <tbody>${rows}</tbody>
</table></div>`;
}

/**
 * The account's audit trail. `page` is null when the filter was refused (`error` says why): the
 * form is shown again with what was typed.
 */
export function auditPage(options: {
  signedIn: SignedIn;
  query: AuditQuery;
  page: AuditPage | null;
  error?: string;
}): Page {
  const { signedIn, query, page } = options;
  const older =
    page?.nextBefore === null || page === null
      ? null
      : html`<p><a href="${AUDIT_PATH}${queryString(query, page.nextBefore)}" rel="next">Older events</a></p>`;
  return {
    title: 'Audit trail',
    trail: ['Integrations', 'Audit trail'],
    signedIn,
    body: html`<section class="card" aria-labelledby="audit-heading">
  <h1 id="audit-heading">Audit trail</h1>
  <p>Every change made to this account's API keys, OAuth clients and webhook endpoints: who, what and when.</p>
  ${filterForm(query, page)}
  ${options.error === undefined ? null : html`<div class="flash flash-error" role="alert">${options.error}</div>`}
  ${page === null ? null : html`<p><a class="button" href="${AUDIT_PATH}.csv${queryString(query)}" download>Download CSV</a> of every event matching the filter.</p>`}
  ${page === null ? null : eventTable(page.events, page.actorNames)}
  ${older}
</section>`,
  };
}
