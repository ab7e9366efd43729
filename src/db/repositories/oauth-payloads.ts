import type { Insertable, Kysely } from 'kysely';
import type { Database, OauthPayloadsTable } from '../schema.ts';
import { repository } from '../store-context.ts';

/** One stored oidc-provider model instance, with the columns its lookups need. */
export type OauthPayloadRow = Omit<Insertable<OauthPayloadsTable>, 'consumed_at' | 'last_used_at'>;

/** A client's grant as the panel and the CLI list it: the payload is parsed by the service. */
export interface ClientGrantRow {
  grant_id: string;
  payload: string;
  last_used_at: string | null;
  user_id: string | null;
  user_name: string | null;
  user_email: string | null;
}

type Lookup = 'id' | 'uid' | 'user_code';

// Well under SQLite's and PostgreSQL's limits on bound parameters.
const ID_CHUNK = 500;
// "Last used" is shown to the minute; finer would cost a write per wider-API request.
const LAST_USED_RESOLUTION_MS = 60_000;

export const oauthPayloadRepository = repository('oauthPayloadRepository', {
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
          client_id: eb.ref('excluded.client_id'),
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

  /** `deleteByUserId` for many users, in one statement per chunk (an import deactivates in bulk). */
  async deleteByUserIds(db: Kysely<Database>, userIds: string[]): Promise<void> {
    for (let start = 0; start < userIds.length; start += ID_CHUNK) {
      await db
        .deleteFrom('oauth_payloads')
        .where('user_id', 'in', userIds.slice(start, start + ID_CHUNK))
        .execute();
    }
  },

  /** The unexpired grants issued to a client, most recently used first, with their users. */
  async listGrantsOfClient(db: Kysely<Database>, clientId: string, now: string): Promise<ClientGrantRow[]> {
    return (
      db
        .selectFrom('oauth_payloads as p')
        .leftJoin('users as u', 'u.id', 'p.user_id')
        .select([
          'p.id as grant_id',
          'p.payload',
          'p.last_used_at',
          'p.user_id',
          'u.name as user_name',
          'u.email as user_email',
        ])
        .where('p.model', '=', 'Grant')
        .where('p.client_id', '=', clientId)
        .where((eb) => eb.or([eb('p.expires_at', 'is', null), eb('p.expires_at', '>', now)]))
        // Never-used grants last on both stores (PostgreSQL would put NULL first when descending).
        .orderBy('p.last_used_at', (ob) => ob.desc().nullsLast())
        .orderBy('p.id')
        .execute()
    );
  },

  /** Whether `grantId` is a grant of `clientId` (a revocation names both). */
  async grantBelongsToClient(db: Kysely<Database>, grantId: string, clientId: string): Promise<boolean> {
    const row = await db
      .selectFrom('oauth_payloads')
      .select('id')
      .where('model', '=', 'Grant')
      .where('id', '=', grantId)
      .where('client_id', '=', clientId)
      .executeTakeFirst();
    return row !== undefined;
  },

  /**
   * Records that a token of the grant was issued or presented. Written at most once a minute per
   * grant (the condition is in the statement, so every instance shares it), not on every request.
   */
  async touchGrant(db: Kysely<Database>, grantId: string, now: Date): Promise<void> {
    const staleBefore = new Date(now.getTime() - LAST_USED_RESOLUTION_MS).toISOString();
    await db
      .updateTable('oauth_payloads')
      .set({ last_used_at: now.toISOString() })
      .where('model', '=', 'Grant')
      .where('id', '=', grantId)
      .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', staleBefore)]))
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
});
