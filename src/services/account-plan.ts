import type { Kysely } from 'kysely';
import { accountRepository } from '../db/repositories/accounts.ts';
import type { Database } from '../db/schema.ts';
import { InputError } from '../errors.ts';

/**
 * Refuses, with one line, an account that does not exist or whose plan has no API access: what
 * no key, webhook endpoint or test event may be made for (the key and webhook services).
 */
export async function requireApiAccess(db: Kysely<Database>, accountId: string): Promise<void> {
  const account = await accountRepository.findById(db, accountId);
  if (account === undefined) throw new InputError(`no account with id "${accountId}"`);
  if (account.api_access !== 1)
    throw new InputError(`the plan of account "${accountId}" does not include API access`);
}
