import type { Kysely } from 'kysely';
import { type AccountRow, accountRepository } from '../db/repositories/accounts.ts';
import type { Database } from '../db/schema.ts';

export const accountService = {
  /** The account with its plan and limits, as the store holds it now; `undefined` if it is gone. */
  async findById(db: Kysely<Database>, accountId: string): Promise<AccountRow | undefined> {
    return accountRepository.findById(db, accountId);
  },
};
