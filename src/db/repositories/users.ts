import { type ExpressionBuilder, type Kysely, type Selectable, sql } from 'kysely';
import type { Database, UsersTable } from '../schema.ts';
import { anyColumnChanged, type ChangeStamp, enteredView } from './change-stamp.ts';
import { afterNameKey, type NameKey, nameKey } from './by-name.ts';
import { repository } from '../store-context.ts';

/** What the API shows of a user, in `UserSchema` order (the lists and the changes feed). */
export const PUBLIC_USER_COLUMNS = [
  'id',
  'name',
  'email',
  'role',
  'department',
  'job_title',
  'created_at',
] as const;

/** The columns an import may change. */
const UPDATED_COLUMNS = [
  'name',
  'email',
  'role',
  'department',
  'job_title',
  'active',
  'vendor_support',
  'created_at',
] as const;

/** A user as the API shows it. */
export type UserRow = Pick<Selectable<UsersTable>, (typeof PUBLIC_USER_COLUMNS)[number]>;

/**
 * The users the public API shows: active and not vendor support. The one statement of the rule:
 * the list filters by it, and the changes feed turns a user it excludes into a deletion.
 */
export const isPublicUser = (eb: ExpressionBuilder<Database, 'users'>) =>
  eb.and([eb('active', '=', 1), eb('vendor_support', '=', 0)]);

/** What an import writes: a password is only ever set by `users set-password`. */
export type UserInput = Omit<
  Selectable<UsersTable>,
  'password_hash' | 'change_seq' | 'changed_at' | 'created_seq'
>;

/** What sign-in and the admin panel check about a person. */
export type UserAccountRow = Omit<Selectable<UsersTable>, 'change_seq' | 'changed_at' | 'created_seq'>;

/** Users the public API shows: active and not vendor support, by name case-insensitively, then id. */
function visible(db: Kysely<Database>, accountId: string) {
  return db
    .selectFrom('users')
    .select(PUBLIC_USER_COLUMNS)
    .where('account_id', '=', accountId)
    .where(isPublicUser)
    .orderBy(sql`lower(name)`)
    .orderBy('id');
}

export const userRepository = repository('userRepository', {
  async listVisible(db: Kysely<Database>, accountId: string): Promise<UserRow[]> {
    return visible(db, accountId).execute();
  },

  /** The list of `listVisible` in chunks: up to `limit` users after `after`, with their keys. */
  async listVisibleAfter(
    db: Kysely<Database>,
    accountId: string,
    after: NameKey | null,
    limit: number,
  ): Promise<(UserRow & NameKey)[]> {
    return visible(db, accountId).select(nameKey).where(afterNameKey(after)).limit(limit).execute();
  },

  async findByEmail(db: Kysely<Database>, email: string): Promise<UserAccountRow | undefined> {
    return db
      .selectFrom('users')
      .select([...PUBLIC_USER_COLUMNS, 'account_id', 'active', 'vendor_support', 'password_hash'])
      .where(sql`lower(email)`, '=', email.toLowerCase())
      .executeTakeFirst();
  },

  async findById(db: Kysely<Database>, id: string): Promise<UserAccountRow | undefined> {
    return db
      .selectFrom('users')
      .select([...PUBLIC_USER_COLUMNS, 'account_id', 'active', 'vendor_support', 'password_hash'])
      .where('id', '=', id)
      .executeTakeFirst();
  },

  /** Names of those of `ids` that are users of the account, for showing who did something. */
  async findNamesByIds(
    db: Kysely<Database>,
    accountId: string,
    ids: string[],
  ): Promise<{ id: string; name: string }[]> {
    if (ids.length === 0) return [];
    return db
      .selectFrom('users')
      .select(['id', 'name'])
      .where('account_id', '=', accountId)
      .where('id', 'in', ids)
      .execute();
  },

  async setPasswordHash(db: Kysely<Database>, id: string, passwordHash: string): Promise<void> {
    await db.updateTable('users').set({ password_hash: passwordHash }).where('id', '=', id).execute();
  },

  /** Replaces the hash only while it is still `previous`, so a password set meanwhile is kept. */
  async replacePasswordHash(db: Kysely<Database>, id: string, previous: string, next: string): Promise<void> {
    await db
      .updateTable('users')
      .set({ password_hash: next })
      .where('id', '=', id)
      .where('password_hash', '=', previous)
      .execute();
  },

  /** Existing users whose email (case-insensitively) is one of `emails`. */
  async findIdsByEmails(db: Kysely<Database>, emails: string[]): Promise<{ id: string; email: string }[]> {
    if (emails.length === 0) return [];
    return db
      .selectFrom('users')
      .select(['id', 'email'])
      .where(
        sql`lower(email)`,
        'in',
        emails.map((e) => e.toLowerCase()),
      )
      .execute();
  },

  /** Inserts or updates by id; a user whose fields are unchanged keeps their place in the feed. */
  async upsertMany(db: Kysely<Database>, users: (UserInput & ChangeStamp)[]): Promise<void> {
    if (users.length === 0) return;
    await db
      .insertInto('users')
      .values(users)
      .onConflict((oc) =>
        oc
          .column('id')
          .doUpdateSet((eb) => ({
            name: eb.ref('excluded.name'),
            email: eb.ref('excluded.email'),
            role: eb.ref('excluded.role'),
            department: eb.ref('excluded.department'),
            job_title: eb.ref('excluded.job_title'),
            active: eb.ref('excluded.active'),
            vendor_support: eb.ref('excluded.vendor_support'),
            created_at: eb.ref('excluded.created_at'),
            change_seq: eb.ref('excluded.change_seq'),
            changed_at: eb.ref('excluded.changed_at'),
            created_seq: enteredView(
              'users',
              (row) =>
                sql<boolean>`${sql.ref(`${row}.active`)} = 1 AND ${sql.ref(`${row}.vendor_support`)} = 0`,
            ),
          }))
          .where(anyColumnChanged('users', UPDATED_COLUMNS)),
      )
      .execute();
  },

  /** The addresses of the account's active Super Admins (vendor support left out): who is told by mail. */
  async superAdminEmails(db: Kysely<Database>, accountId: string): Promise<string[]> {
    const rows = await db
      .selectFrom('users')
      .select('email')
      .where('account_id', '=', accountId)
      .where('role', '=', 'super_admin')
      .where('active', '=', 1)
      .where('vendor_support', '=', 0)
      .orderBy('email')
      .execute();
    return rows.map((row) => row.email);
  },
});
