import { parseArgs } from 'node:util';
import { hashPassword, MIN_PASSWORD_LENGTH } from '../auth/passwords.ts';
import { adminSessionRepository } from '../db/repositories/admin-sessions.ts';
import { oauthPayloadRepository } from '../db/repositories/oauth-payloads.ts';
import { userRepository } from '../db/repositories/users.ts';
import { InputError } from '../errors.ts';
import { type Io, withDatabase } from './context.ts';

export const USERS_USAGE =
  'safety-api users set-password --email EMAIL   (the password is read from standard input)';

export async function usersCommand(args: string[], io: Io): Promise<void> {
  const [action, ...rest] = args;
  if (action !== 'set-password') throw new InputError(`usage: ${USERS_USAGE}`);
  const { values } = parseArgs({ args: rest, options: { email: { type: 'string' } } });
  if (values.email === undefined) throw new InputError('users set-password needs --email EMAIL');
  const email = values.email;

  const password = (await io.readStdin()).replace(/\r?\n$/, '');
  if (password.length < MIN_PASSWORD_LENGTH) {
    throw new InputError(`the password must be at least ${MIN_PASSWORD_LENGTH} characters`);
  }
  const passwordHash = await hashPassword(password);
  await withDatabase(async (db) => {
    const user = await userRepository.findByEmail(db, email);
    if (user === undefined) throw new InputError(`no user with email "${email}"`);
    // A new password ends what the old one opened (it may have been stolen): admin panel
    // sessions, and OAuth grants, tokens, codes and sign-in sessions. Partner apps must be
    // approved again. In one transaction, so no session outlives the old password.
    await db.transaction().execute(async (trx) => {
      await userRepository.setPasswordHash(trx, user.id, passwordHash);
      await adminSessionRepository.deleteByUserId(trx, user.id);
      await oauthPayloadRepository.deleteByUserId(trx, user.id);
    });
  });
  io.out(`Password set for ${email}.`);
  io.out('Their admin panel sessions and partner app approvals (OAuth grants and tokens) are ended.');
}
