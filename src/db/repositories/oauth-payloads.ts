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

  async consume(db: Kysely<Database>, model: string, id: string, now: string): Promise<void> {
    await db
      .updateTable('oauth_payloads')
      .set({ consumed_at: now })
      .where('model', '=', model)
      .where('id', '=', id)
      .execute();
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
