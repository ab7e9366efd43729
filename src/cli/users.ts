import { parseArgs } from 'node:util';
import { hashPassword, MIN_PASSWORD_LENGTH } from '../auth/passwords.ts';
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
  await withDatabase(async (db) => {
    const user = await userRepository.findByEmail(db, email);
    if (user === undefined) throw new InputError(`no user with email "${email}"`);
    await userRepository.setPasswordHash(db, user.id, await hashPassword(password));
  });
  io.out(`Password set for ${email}.`);
}
