import { parseArgs } from 'node:util';
import { hashPassword, MIN_PASSWORD_LENGTH } from '../auth/passwords.ts';
import { userRepository } from '../db/repositories/users.ts';
import { InputError } from '../errors.ts';
import type { Command, CommandGroup } from './command.ts';
import { withDatabase } from './context.ts';

const setPassword: Command = {
  name: 'users set-password',
  summary: "Set a user's password (for the admin panel and the OAuth sign-in), read from standard input",
  usage: ['safety-api users set-password --email EMAIL   (the password is read from standard input)'],
  notes: [`The password must be at least ${MIN_PASSWORD_LENGTH} characters; a trailing newline is dropped.`],
  example: "printf '%s' 'a long passphrase' | safety-api users set-password --email dana@example.com",
  async run(args, io) {
    const { values } = parseArgs({ args, options: { email: { type: 'string' } } });
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
  },
};

export const usersCommands: CommandGroup = {
  name: 'users',
  summary: 'Manage the people who sign in to the admin panel and to partner apps',
  subcommands: [setPassword],
};
