import { InputError } from '../errors.ts';

/**
 * Webhook event types and an endpoint's filter of them (docs/design.md, "Webhooks"; docs/webhooks.md).
 *
 * - `<type>.created`: the receiver has not been told of the record in this life (since it last
 *   entered the public view: it is new, or it came back after a deletion).
 * - `<type>.updated`: the receiver was told of it in this life (it acknowledged a `created` or an
 *   `updated`, or its filter left one out), or the record was in the view when the receiver's
 *   position was set (creation, resend), and it changed. `fetch-batch.ts` reads what each was told,
 *   `record-outcome.ts` writes it.
 * - `<type>.deleted`: the record left the public view (deleted, deactivated, vendor support).
 * Compacted like the feed: a record changed several times before its event left is sent once, in
 * its latest state, so a record created and then changed is one `created`.
 */

export const RECORD_EVENT_KINDS = ['incident', 'user', 'department', 'location'] as const;
export type RecordEventKind = (typeof RECORD_EVENT_KINDS)[number];
export const RECORD_EVENT_ACTIONS = ['created', 'updated', 'deleted'] as const;
export type RecordEventAction = (typeof RECORD_EVENT_ACTIONS)[number];

export const TEST_EVENT_TYPE = 'webhook.test';

export const EVENT_TYPES: readonly string[] = [
  ...RECORD_EVENT_KINDS.flatMap((kind) => RECORD_EVENT_ACTIONS.map((action) => `${kind}.${action}`)),
  TEST_EVENT_TYPE,
];

/** Every pattern a filter may hold: an event type, `<kind>.*`, or `*`. */
const PATTERNS = new Set([
  ...EVENT_TYPES,
  ...RECORD_EVENT_KINDS.map((kind) => `${kind}.*`),
  'webhook.*',
  '*',
]);

/** The default filter: every event. */
export const ALL_EVENTS = ['*'];

/**
 * `--events` or the panel's field: comma-separated types and wildcards, whitespace ignored. Empty
 * means every event. Returned in canonical form (`canonicalFilter`).
 */
export function parseEventFilter(raw: string | readonly string[] | undefined): string[] {
  const items = (typeof raw === 'string' ? raw.split(',') : (raw ?? []))
    .map((item) => item.trim())
    .filter((item) => item !== '');
  if (items.length === 0) return [...ALL_EVENTS];
  const unknown = items.filter((item) => !PATTERNS.has(item));
  if (unknown.length > 0) {
    throw new InputError(
      `unknown event type ${unknown.map((item) => `"${item}"`).join(', ')}: use types such as incident.created, ` +
        'wildcards such as incident.* or *, separated by commas',
    );
  }
  return canonicalFilter(items);
}

/**
 * One spelling per filter, so that two filters that let the same events through are stored alike
 * (an account has one endpoint per URL and filter): each pattern once, none that a wildcard also in
 * the filter covers (`*` covers all, `incident.*` covers `incident.created`), sorted.
 */
export function canonicalFilter(patterns: readonly string[]): string[] {
  const kept = new Set(patterns);
  if (kept.has('*')) return [...ALL_EVENTS];
  return [...kept]
    .filter((pattern) => pattern.endsWith('.*') || !kept.has(`${pattern.slice(0, pattern.indexOf('.'))}.*`))
    .sort();
}

/** Whether `type` passes the filter. A test event is always sent: it is asked for. */
export function matchesFilter(filter: readonly string[], type: string): boolean {
  if (type === TEST_EVENT_TYPE) return true;
  const kind = type.slice(0, type.indexOf('.'));
  return filter.some((pattern) => pattern === '*' || pattern === type || pattern === `${kind}.*`);
}
