import type { Kysely } from 'kysely';
import type { Database } from '../schema.ts';

export const oauthKeyRepository = {
  async find(db: Kysely<Database>, kind: string): Promise<string | undefined> {
    const row = await db.selectFrom('oauth_keys').select('value').where('kind', '=', kind).executeTakeFirst();
    return row?.value;
  },

  /** Stores `value` unless a value of that kind exists; returns the stored one either way. */
  async insertOnce(db: Kysely<Database>, kind: string, value: string, now: string): Promise<string> {
    await db
      .insertInto('oauth_keys')
      .values({ kind, value, created_at: now })
      .onConflict((oc) => oc.column('kind').doNothing())
      .execute();
    const stored = await oauthKeyRepository.find(db, kind);
    if (stored === undefined) throw new Error(`oauth key "${kind}" vanished right after being stored`);
    return stored;
  },
};
