import type { Kysely } from 'kysely';
import type { CommitWatch } from '../db/commit-watch.ts';
import { apiKeyRepository, type KeyForAuth } from '../db/repositories/api-keys.ts';
import type { Database } from '../db/schema.ts';
import { Lru } from '../lib/lru.ts';

/** Rows kept at most (the least recently used go first): far more keys than any deployment has in use at once. */
const MAX_CACHED_KEYS = 10_000;

/**
 * Finds the key and account row of a key hash for `authenticateApiKey`, exactly as the store holds
 * it at the moment of the request.
 *
 * Where the store has a commit watch (SQLite in WAL mode), a row read earlier is served again as
 * long as nothing has been committed since it was read, by any connection of any process: a
 * revocation, a scope or plan change or an import is one commit, so it applies at the very next
 * request all the same. On a busy server with nothing being written, that spares a SQL statement on
 * every request. Without a watch (PostgreSQL), every lookup reads the store. Unknown keys are never
 * kept, so guessing keys cannot fill the memory.
 */
export class KeyLookup {
  private readonly rows = new Lru<string, { generation: number; row: KeyForAuth }>(MAX_CACHED_KEYS);

  constructor(
    private readonly db: Kysely<Database>,
    private readonly commitWatch: Pick<CommitWatch, 'current'> | null,
  ) {}

  async findByHash(keyHash: string): Promise<KeyForAuth | undefined> {
    if (this.commitWatch === null) return apiKeyRepository.findForAuthByHash(this.db, keyHash);
    // Taken before the read: a commit after this point changes the generation the next lookup sees.
    const generation = this.commitWatch.current();
    const cached = this.rows.get(keyHash);
    if (cached !== undefined && cached.generation === generation) return cached.row;

    const row = await apiKeyRepository.findForAuthByHash(this.db, keyHash);
    if (row === undefined) {
      this.rows.delete(keyHash);
      return undefined;
    }
    this.rows.set(keyHash, { generation, row });
    return row;
  }
}
