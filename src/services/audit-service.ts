import type { Kysely } from 'kysely';
import {
  type AuditEventRow,
  type AuditFilter,
  type AuditSubject,
  auditRepository,
} from '../db/repositories/audit-events.ts';
import type { Database } from '../db/schema.ts';
import { InputError } from '../errors.ts';
import { csvLine } from '../lib/csv.ts';
import { storableText } from './input-text.ts';
import { userService } from './user-service.ts';

/**
 * The account's audit trail as the panel searches it: filters by actor, subject (a key, an OAuth
 * client, a webhook endpoint), action and date range, in pages, and the same selection as CSV.
 */

export const AUDIT_PAGE_SIZE = 50;
// The CSV is read in batches, so a long trail is never held in memory at once.
const CSV_BATCH = 1000;

export const AUDIT_SUBJECTS: Record<AuditSubject, string> = {
  api_key: 'API key',
  oauth_client: 'OAuth client',
  webhook_endpoint: 'Webhook endpoint',
};

/** What a subject type is called on the page; a type this build does not know shows as stored. */
export function subjectName(type: string): string {
  return Object.hasOwn(AUDIT_SUBJECTS, type) ? AUDIT_SUBJECTS[type as AuditSubject] : type;
}

/** The command line acts as `cli` (src/cli); everyone else by user id. */
const CLI_ACTOR = 'cli';

/** The filter's query parameters, as the form sends them; blank means "any". */
export interface AuditQuery {
  actor?: string;
  subject_type?: string;
  subject_id?: string;
  action?: string;
  /** Calendar days (YYYY-MM-DD, UTC), both included. */
  from?: string;
  to?: string;
  /** Keyset paging: events with a smaller id. */
  before?: string;
}

export interface AuditPage {
  events: AuditEventRow[];
  /** The `before` of the next (older) page, or null on the last. */
  nextBefore: number | null;
  actors: { value: string; label: string }[];
  actions: string[];
  /** Display names of the actors on this page and in the choices. */
  actorNames: Map<string, string>;
}

const DAY = /^\d{4}-\d{2}-\d{2}$/;
const DAY_MS = 24 * 3600_000;

/** A parameter's value, trimmed, or undefined when blank; refused, naming it, if no store could hold it. */
function filled(query: AuditQuery, field: keyof AuditQuery): string | undefined {
  const trimmed = query[field]?.trim();
  return trimmed === undefined || trimmed === '' ? undefined : storableText(field, trimmed);
}

/** Midnight UTC of a YYYY-MM-DD day, `plusDays` later; a day that does not exist is refused. */
function dayStart(value: string, field: string, plusDays: number): string {
  const time = Date.parse(`${value}T00:00:00.000Z`);
  if (!DAY.test(value) || Number.isNaN(time) || new Date(time).toISOString().slice(0, 10) !== value) {
    throw new InputError(`${field} must be a date like 2026-01-31 (got "${value}")`);
  }
  return new Date(time + plusDays * DAY_MS).toISOString();
}

/** The repository filter for a query; throws InputError naming the bad parameter. */
export function auditFilterOf(query: AuditQuery): AuditFilter {
  const filter: AuditFilter = {};
  const actor = filled(query, 'actor');
  if (actor !== undefined) filter.actor = actor;
  const subjectType = filled(query, 'subject_type');
  if (subjectType !== undefined) {
    if (!Object.hasOwn(AUDIT_SUBJECTS, subjectType)) {
      throw new InputError(`subject_type must be one of ${Object.keys(AUDIT_SUBJECTS).join(', ')}`);
    }
    filter.subjectType = subjectType as AuditSubject;
  }
  const subjectId = filled(query, 'subject_id');
  if (subjectId !== undefined) filter.subjectId = subjectId;
  const action = filled(query, 'action');
  if (action !== undefined) filter.action = action;
  const from = filled(query, 'from');
  if (from !== undefined) filter.from = dayStart(from, 'from', 0);
  const to = filled(query, 'to');
  // `to` is a whole day: events before the next midnight.
  if (to !== undefined) filter.until = dayStart(to, 'to', 1);
  return filter;
}

function beforeOf(query: AuditQuery): number | undefined {
  const before = filled(query, 'before');
  if (before === undefined) return undefined;
  if (!/^[1-9]\d{0,15}$/.test(before)) throw new InputError('before must be a positive whole number');
  return Number(before);
}

async function actorNamesOf(db: Kysely<Database>, accountId: string, actors: string[]) {
  const names = await userService.namesByIds(
    db,
    accountId,
    actors.filter((actor) => actor !== CLI_ACTOR),
  );
  names.set(CLI_ACTOR, 'Command line');
  return names;
}

export const auditService = {
  async page(db: Kysely<Database>, accountId: string, query: AuditQuery): Promise<AuditPage> {
    const filter = auditFilterOf(query);
    // One more than a page tells whether an older page exists.
    const rows = await auditRepository.search(db, accountId, filter, AUDIT_PAGE_SIZE + 1, beforeOf(query));
    const events = rows.slice(0, AUDIT_PAGE_SIZE);
    const actorValues = await auditRepository.distinctValues(db, accountId, 'actor');
    const actorNames = await actorNamesOf(db, accountId, actorValues);
    return {
      events,
      nextBefore: rows.length > AUDIT_PAGE_SIZE ? (events.at(-1)?.id ?? null) : null,
      actors: actorValues.map((value) => ({ value, label: actorNames.get(value) ?? value })),
      actions: await auditRepository.distinctValues(db, accountId, 'action'),
      actorNames,
    };
  },

  /**
   * Every event matching the query, newest first, as CSV lines after a header row. The query is
   * checked here, before the first line, so a bad one is refused rather than cut short.
   */
  csv(db: Kysely<Database>, accountId: string, query: AuditQuery): AsyncGenerator<string> {
    return csvLines(db, accountId, auditFilterOf(query));
  },
};

/** Text cells are formula-escaped (lib/csv.ts): details hold names people typed. */
async function* csvLines(
  db: Kysely<Database>,
  accountId: string,
  filter: AuditFilter,
): AsyncGenerator<string> {
  yield csvLine([
    'id',
    'created_at',
    'actor',
    'actor_name',
    'subject_type',
    'subject_id',
    'action',
    'detail',
  ]);
  let beforeId: number | undefined;
  for (;;) {
    const rows = await auditRepository.search(db, accountId, filter, CSV_BATCH, beforeId);
    const names = await actorNamesOf(db, accountId, [...new Set(rows.map((row) => row.actor))]);
    for (const row of rows) {
      yield csvLine([
        row.id,
        row.created_at,
        row.actor,
        names.get(row.actor) ?? null,
        row.subject_type,
        row.subject_id,
        row.action,
        row.detail,
      ]);
    }
    const last = rows.at(-1);
    if (rows.length < CSV_BATCH || last === undefined) return;
    beforeId = last.id;
  }
}
