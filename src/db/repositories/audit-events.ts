import type { Insertable, Kysely, Selectable, SelectQueryBuilder } from 'kysely';
import type { AuditEventsTable, Database } from '../schema.ts';
import { repository } from '../store-context.ts';

/** What an audit event is about. */
export type AuditSubject = 'api_key' | 'webhook_endpoint' | 'oauth_client';

export type AuditEventRow = Omit<Selectable<AuditEventsTable>, 'account_id'>;

/** What the panel's audit trail and its CSV are narrowed to; every field is optional. */
export interface AuditFilter {
  actor?: string;
  subjectType?: AuditSubject;
  subjectId?: string;
  action?: string;
  /** ISO instants: `from` inclusive, `until` exclusive. */
  from?: string;
  until?: string;
}

const EVENT_COLUMNS = [
  'id',
  'subject_type',
  'subject_id',
  'actor',
  'action',
  'detail',
  'created_at',
] as const;

function filtered<O>(
  query: SelectQueryBuilder<Database, 'audit_events', O>,
  accountId: string,
  filter: AuditFilter,
): SelectQueryBuilder<Database, 'audit_events', O> {
  let narrowed = query.where('account_id', '=', accountId);
  if (filter.actor !== undefined) narrowed = narrowed.where('actor', '=', filter.actor);
  if (filter.subjectType !== undefined) narrowed = narrowed.where('subject_type', '=', filter.subjectType);
  if (filter.subjectId !== undefined) narrowed = narrowed.where('subject_id', '=', filter.subjectId);
  if (filter.action !== undefined) narrowed = narrowed.where('action', '=', filter.action);
  if (filter.from !== undefined) narrowed = narrowed.where('created_at', '>=', filter.from);
  if (filter.until !== undefined) narrowed = narrowed.where('created_at', '<', filter.until);
  return narrowed;
}

/** The one audit trail: every change made to a key, an OAuth client or a webhook endpoint, by whom and when. */
export const auditRepository = repository('auditRepository', {
  async insert(
    db: Kysely<Database>,
    event: Insertable<AuditEventsTable> & { subject_type: AuditSubject },
  ): Promise<void> {
    await db.insertInto('audit_events').values(event).execute();
  },

  /**
   * A page of the account's events matching `filter`, newest first: `limit` events with an id
   * below `beforeId` (keyset paging, so a page costs the same however deep it is).
   */
  async search(
    db: Kysely<Database>,
    accountId: string,
    filter: AuditFilter,
    limit: number,
    beforeId?: number,
  ): Promise<AuditEventRow[]> {
    let query = filtered(db.selectFrom('audit_events').select(EVENT_COLUMNS), accountId, filter);
    if (beforeId !== undefined) query = query.where('id', '<', beforeId);
    return query.orderBy('id', 'desc').limit(limit).execute();
  },

  /** The actors and the actions of the account's trail, for the filter's choices. */
  async distinctValues(
    db: Kysely<Database>,
    accountId: string,
    column: 'actor' | 'action',
  ): Promise<string[]> {
    const rows = await db
      .selectFrom('audit_events')
      .select(column)
      .distinct()
      .where('account_id', '=', accountId)
      .orderBy(column)
      .execute();
    return rows.map((row) => row[column]);
  },

  /** The account's latest `limit` events, newest first; only those about `subject` when given. */
  async list(
    db: Kysely<Database>,
    accountId: string,
    limit: number,
    subject?: { type: AuditSubject; id?: string },
  ): Promise<AuditEventRow[]> {
    let query = db.selectFrom('audit_events').select(EVENT_COLUMNS).where('account_id', '=', accountId);
    if (subject !== undefined) query = query.where('subject_type', '=', subject.type);
    if (subject?.id !== undefined) query = query.where('subject_id', '=', subject.id);
    return query.orderBy('id', 'desc').limit(limit).execute();
  },
});
