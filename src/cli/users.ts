import { parseArgs } from 'node:util';
import { MIN_PASSWORD_LENGTH } from '../auth/passwords.ts';
import { InputError } from '../errors.ts';
import { userService } from '../services/user-service.ts';
import type { Command, CommandGroup } from './command.ts';
import { withDatabase } from './context.ts';

const setPassword: Command = {
  name: 'users set-password',
  summary: "Set a user's password (for the admin panel and the OAuth sign-in), read from standard input",
  usage: ['safety-api users set-password --email EMAIL   (the password is read from standard input)'],
  notes: [
    `The password must be at least ${MIN_PASSWORD_LENGTH} characters; a trailing newline is dropped.`,
    "It ends the user's admin panel sessions and partner app approvals (OAuth grants and tokens).",
  ],
  example: "printf '%s' 'a long passphrase' | safety-api users set-password --email dana@example.com",
  async run(args, io) {
    const { values } = parseArgs({ args, options: { email: { type: 'string' } } });
    if (values.email === undefined) throw new InputError('users set-password needs --email EMAIL');
    const email = values.email;
    const password = (await io.readStdin()).replace(/\r?\n$/, '');
    await withDatabase(io, (db) => userService.setPassword(db, email, password));
    io.out(`Password set for ${email}.`);
    io.out('Their admin panel sessions and partner app approvals (OAuth grants and tokens) are ended.');
  },
};

export const usersCommands: CommandGroup = {
  name: 'users',
  summary: 'Manage the people who sign in to the admin panel and to partner apps',
  subcommands: [setPassword],
};
