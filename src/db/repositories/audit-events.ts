import type { Insertable, Kysely, Selectable } from 'kysely';
import type { AuditEventsTable, Database } from '../schema.ts';

/** What an audit event is about. */
export type AuditSubject = 'api_key' | 'webhook_endpoint';

export type AuditEventRow = Omit<Selectable<AuditEventsTable>, 'account_id'>;

/** The one audit trail: every change made to a key or a webhook endpoint, by whom and when. */
export const auditRepository = {
  async insert(
    db: Kysely<Database>,
    event: Insertable<AuditEventsTable> & { subject_type: AuditSubject },
  ): Promise<void> {
    await db.insertInto('audit_events').values(event).execute();
  },

  /** The account's latest `limit` events, newest first; only those about `subject` when given. */
  async list(
    db: Kysely<Database>,
    accountId: string,
    limit: number,
    subject?: { type: AuditSubject; id?: string },
  ): Promise<AuditEventRow[]> {
    let query = db
      .selectFrom('audit_events')
      .select(['id', 'subject_type', 'subject_id', 'actor', 'action', 'detail', 'created_at'])
      .where('account_id', '=', accountId);
    if (subject !== undefined) query = query.where('subject_type', '=', subject.type);
    if (subject?.id !== undefined) query = query.where('subject_id', '=', subject.id);
    return query.orderBy('id', 'desc').limit(limit).execute();
  },
};
