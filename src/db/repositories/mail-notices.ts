import type { Insertable, Kysely } from 'kysely';
import type { Database, MailNoticesTable } from '../schema.ts';
import { repository } from '../store-context.ts';

export const mailNoticeRepository = repository('mailNoticeRepository', {
  /**
   * Claims the notice named by `row.key`: true for the one caller that inserted it, false for every
   * other (the primary key decides, on either store, however many instances race).
   */
  async claim(db: Kysely<Database>, row: Insertable<MailNoticesTable>): Promise<boolean> {
    const result = await db
      .insertInto('mail_notices')
      .values(row)
      .onConflict((oc) => oc.column('key').doNothing())
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0n) === 1;
  },

  /** Gives a claim back (its mail did not leave), so that a later occasion sends it. */
  async release(db: Kysely<Database>, key: string): Promise<void> {
    await db.deleteFrom('mail_notices').where('key', '=', key).execute();
  },
});
