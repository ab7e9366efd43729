import type { Kysely } from 'kysely';
import type { Account, Client, FindAccount } from 'oidc-provider';
import { type UserAccountRow, userRepository } from '../db/repositories/users.ts';
import type { Database } from '../db/schema.ts';

/** The account a client belongs to, from its `account_id` metadata (see adapter.ts). */
export function clientAccountId(client: Client): string {
  return String(client.metadata().account_id);
}

/** Whether `user` may act through a client of `accountId`: active, and of that same account. */
export function userMayUseAccount(user: UserAccountRow | undefined, accountId: string): boolean {
  return user !== undefined && user.active === 1 && user.account_id === accountId;
}

function toAccount(user: UserAccountRow): Account {
  return {
    accountId: user.id,
    // oidc-provider keeps only the claims the granted scopes allow (CLAIMS_BY_SCOPE).
    claims: () => ({
      sub: user.id,
      name: user.name,
      email: user.email,
      role: user.role,
      department: user.department,
      job_title: user.job_title,
    }),
  };
}

/**
 * The provider's view of users. A user who was deactivated or who does not belong to the
 * requesting client's account is unknown, so their codes, refresh tokens and userinfo calls fail.
 */
export function findAccount(db: Kysely<Database>): FindAccount {
  return async (ctx, sub) => {
    const user = await userRepository.findById(db, sub);
    const client = ctx.oidc?.client;
    if (user === undefined || user.active !== 1) return undefined;
    if (client !== undefined && !userMayUseAccount(user, clientAccountId(client))) return undefined;
    return toAccount(user);
  };
}
