import type { Kysely } from 'kysely';
import {
  type NamedResourceRow,
  type NamedResourceTable,
  namedResourceRepository,
} from '../db/repositories/named-resources.ts';
import { type UserRow, userRepository } from '../db/repositories/users.ts';
import type { Database } from '../db/schema.ts';

/** The lists of named records both APIs serve, one route each. */
export const NAMED_RESOURCE_TABLES = ['departments', 'locations'] as const satisfies NamedResourceTable[];

/**
 * An account's people and places as both APIs list them: whole (an account's staff and sites are
 * small), by name case-insensitively, then id.
 */
export const directoryService = {
  /** Active users; vendor support accounts are never shown. */
  async listUsers(db: Kysely<Database>, accountId: string): Promise<UserRow[]> {
    return userRepository.listVisible(db, accountId);
  },

  /** Active departments or locations. */
  async listNamedResources(
    db: Kysely<Database>,
    table: NamedResourceTable,
    accountId: string,
  ): Promise<NamedResourceRow[]> {
    return namedResourceRepository.listActive(db, table, accountId);
  },
};
