import type { Kysely } from 'kysely';
import { hashPassword, MIN_PASSWORD_LENGTH } from '../auth/passwords.ts';
import { adminSessionRepository } from '../db/repositories/admin-sessions.ts';
import { oauthPayloadRepository } from '../db/repositories/oauth-payloads.ts';
import { userRepository } from '../db/repositories/users.ts';
import type { Database } from '../db/schema.ts';
import { InputError } from '../errors.ts';

export const userService = {
  /** Names of the account's users among `ids`, by id; ids of other accounts' users are left out. */
  async namesByIds(db: Kysely<Database>, accountId: string, ids: string[]): Promise<Map<string, string>> {
    const users = await userRepository.findNamesByIds(db, accountId, ids);
    return new Map(users.map((user) => [user.id, user.name]));
  },

  /**
   * Sets a user's password. A new password ends what the old one opened (it may have been
   * stolen): admin panel sessions, and OAuth grants, tokens, codes and sign-in sessions, so partner
   * apps must be approved again. In one transaction, so no session outlives the old password.
   */
  async setPassword(db: Kysely<Database>, email: string, password: string): Promise<void> {
    if (password.length < MIN_PASSWORD_LENGTH) {
      throw new InputError(`the password must be at least ${MIN_PASSWORD_LENGTH} characters`);
    }
    const passwordHash = await hashPassword(password);
    const user = await userRepository.findByEmail(db, email);
    if (user === undefined) throw new InputError(`no user with email "${email}"`);
    await db.transaction().execute(async (trx) => {
      await userRepository.setPasswordHash(trx, user.id, passwordHash);
      await adminSessionRepository.deleteByUserId(trx, user.id);
      await oauthPayloadRepository.deleteByUserId(trx, user.id);
    });
  },
};
