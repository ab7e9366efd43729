import type { Insertable, Kysely } from 'kysely';
import type { Database, OauthPayloadsTable } from '../schema.ts';

/** One stored oidc-provider model instance, with the columns its lookups need. */
export type OauthPayloadRow = Omit<Insertable<OauthPayloadsTable>, 'consumed_at'>;

type Lookup = 'id' | 'uid' | 'user_code';

export const oauthPayloadRepository = {
  async upsert(db: Kysely<Database>, row: OauthPayloadRow): Promise<void> {
    await db
      .insertInto('oauth_payloads')
      .values({ ...row, consumed_at: null })
      .onConflict((oc) =>
        oc.columns(['model', 'id']).doUpdateSet((eb) => ({
          payload: eb.ref('excluded.payload'),
          grant_id: eb.ref('excluded.grant_id'),
          user_code: eb.ref('excluded.user_code'),
          uid: eb.ref('excluded.uid'),
          expires_at: eb.ref('excluded.expires_at'),
          user_id: eb.ref('excluded.user_id'),
        })),
      )
      .execute();
  },

  /** The unexpired row of `model` whose `column` equals `value`. */
  async findUnexpired(
    db: Kysely<Database>,
    model: string,
    column: Lookup,
    value: string,
    now: string,
  ): Promise<{ payload: string; consumed_at: string | null } | undefined> {
    return db
      .selectFrom('oauth_payloads')
      .select(['payload', 'consumed_at'])
      .where('model', '=', model)
      .where(column, '=', value)
      .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]))
      .executeTakeFirst();
  },

  /**
   * Marks the row consumed only if it is not yet: true for the one caller that did, false when
   * another use came first (or the row is gone), so two concurrent uses never both win.
   */
  async consume(db: Kysely<Database>, model: string, id: string, now: string): Promise<boolean> {
    const result = await db
      .updateTable('oauth_payloads')
      .set({ consumed_at: now })
      .where('model', '=', model)
      .where('id', '=', id)
      .where('consumed_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  },

  async grantIdOf(db: Kysely<Database>, model: string, id: string): Promise<string | null> {
    const row = await db
      .selectFrom('oauth_payloads')
      .select('grant_id')
      .where('model', '=', model)
      .where('id', '=', id)
      .executeTakeFirst();
    return row?.grant_id ?? null;
  },

  /** A grant and everything issued under it: codes, tokens and the Grant record itself. */
  async revokeGrant(db: Kysely<Database>, grantId: string): Promise<void> {
    await db
      .deleteFrom('oauth_payloads')
      .where((eb) =>
        eb.or([eb('grant_id', '=', grantId), eb.and([eb('model', '=', 'Grant'), eb('id', '=', grantId)])]),
      )
      .execute();
  },

  /** Every record acting for the user: grants, tokens, codes, provider sessions, interactions. */
  async deleteByUserId(db: Kysely<Database>, userId: string): Promise<void> {
    await db.deleteFrom('oauth_payloads').where('user_id', '=', userId).execute();
  },

  async delete(db: Kysely<Database>, model: string, id: string): Promise<void> {
    await db.deleteFrom('oauth_payloads').where('model', '=', model).where('id', '=', id).execute();
  },

  /** Every model instance of a grant: its codes, tokens and the grant itself. */
  async deleteByGrantId(db: Kysely<Database>, grantId: string): Promise<void> {
    await db.deleteFrom('oauth_payloads').where('grant_id', '=', grantId).execute();
  },

  async deleteExpired(db: Kysely<Database>, now: string): Promise<void> {
    await db.deleteFrom('oauth_payloads').where('expires_at', '<=', now).execute();
  },
};
