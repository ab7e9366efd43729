import type { Kysely, Selectable } from 'kysely';
import type { AccountsTable, AdminSessionsTable, Database, UsersTable } from '../schema.ts';
import { repository } from '../store-context.ts';

export type AdminSessionRow = Selectable<AdminSessionsTable>;

/** Columns of a joined table, selected as `<prefix><column>` so they cannot clash with the session's. */
type Prefixed<Row, Prefix extends string> = { [K in keyof Row & string as `${Prefix}${K}`]: Row[K] };

/** A session with what every panel request re-checks about its user and the user's account. */
export type AdminSessionWithUser = AdminSessionRow &
  Prefixed<
    Pick<Selectable<UsersTable>, 'name' | 'email' | 'role' | 'active' | 'vendor_support' | 'account_id'>,
    'user_'
  > &
  Prefixed<Pick<Selectable<AccountsTable>, 'name' | 'api_access'>, 'account_'>;

export const adminSessionRepository = repository('adminSessionRepository', {
  async insert(db: Kysely<Database>, row: AdminSessionRow): Promise<void> {
    await db.insertInto('admin_sessions').values(row).execute();
  },

  async findWithUser(db: Kysely<Database>, idHash: string): Promise<AdminSessionWithUser | undefined> {
    return db
      .selectFrom('admin_sessions as s')
      .innerJoin('users as u', 'u.id', 's.user_id')
      .innerJoin('accounts as a', 'a.id', 'u.account_id')
      .select([
        's.id_hash',
        's.user_id',
        's.account_id',
        's.csrf_token',
        's.flash',
        's.created_at',
        's.last_seen_at',
        's.expires_at',
        'u.name as user_name',
        'u.email as user_email',
        'u.role as user_role',
        'u.active as user_active',
        'u.vendor_support as user_vendor_support',
        'u.account_id as user_account_id',
        'a.name as account_name',
        'a.api_access as account_api_access',
      ])
      .where('s.id_hash', '=', idHash)
      .executeTakeFirst();
  },

  async touch(db: Kysely<Database>, idHash: string, lastSeenAt: string): Promise<void> {
    await db
      .updateTable('admin_sessions')
      .set({ last_seen_at: lastSeenAt })
      .where('id_hash', '=', idHash)
      .execute();
  },

  async setFlash(db: Kysely<Database>, idHash: string, flash: string): Promise<void> {
    await db.updateTable('admin_sessions').set({ flash }).where('id_hash', '=', idHash).execute();
  },

  /** Clears the flash only if it is still `flash`; true when this call is the one that cleared it. */
  async clearFlash(db: Kysely<Database>, idHash: string, flash: string): Promise<boolean> {
    const result = await db
      .updateTable('admin_sessions')
      .set({ flash: null })
      .where('id_hash', '=', idHash)
      .where('flash', '=', flash)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  },

  async deleteByHash(db: Kysely<Database>, idHash: string): Promise<void> {
    await db.deleteFrom('admin_sessions').where('id_hash', '=', idHash).execute();
  },

  /** Every session of the user, when their password changes. */
  async deleteByUserId(db: Kysely<Database>, userId: string): Promise<void> {
    await db.deleteFrom('admin_sessions').where('user_id', '=', userId).execute();
  },

  /** Removes sessions past their absolute end or idle since before `idleCutoff`. */
  async deleteExpired(db: Kysely<Database>, now: string, idleCutoff: string): Promise<void> {
    await db
      .deleteFrom('admin_sessions')
      .where((eb) => eb.or([eb('expires_at', '<=', now), eb('last_seen_at', '<=', idleCutoff)]))
      .execute();
  },
});
