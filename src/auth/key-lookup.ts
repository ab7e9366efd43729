import type { Kysely } from 'kysely';
import type { CommitWatch } from '../db/commit-watch.ts';
import { apiKeyRepository, type KeyForAuth } from '../db/repositories/api-keys.ts';
import type { Database } from '../db/schema.ts';
import { cacheBudgets, DEFAULT_CACHE_MAX_MB } from '../config.ts';
import { ENTRY_OVERHEAD_BYTES, Lru, recordBytes } from '../lib/lru.ts';
import type { SharedGeneration } from './shared-generation.ts';

type CachedRow = { generation: number | string; row: KeyForAuth };

const cachedRowBytes = ({ row }: CachedRow, keyHash: string) =>
  recordBytes(row) + keyHash.length * 2 + ENTRY_OVERHEAD_BYTES;

/**
 * Finds the key and account row of a key hash for `authenticateApiKey`, exactly as the store holds
 * it at the moment of the request.
 *
 * Where the store has a commit watch (SQLite in WAL mode), a row read earlier is served again as
 * long as nothing has been committed since it was read, by any connection of any process: a
 * revocation, a scope or plan change or an import is one commit, so it applies at the very next
 * request all the same. On a busy server with nothing being written, that spares a SQL statement on
 * every request. PostgreSQL with Redis has the shared generation instead, which every writer bumps
 * after its commit (`SharedGeneration`): the same rule, for one Redis read. Without either, every
 * lookup reads the store. Unknown keys are never kept, so guessing keys cannot fill the memory.
 */
export class KeyLookup {
  /**
   * The rows read, within CACHE_MAX_MB's share (the least recently used go first): at its
   * default, about 7,000 keys (some 600 bytes each), far more than any deployment has in use at once.
   */
  private readonly rows: Lru<string, CachedRow>;
  /** How often the rows were dropped: for an unknown generation (`findByHash`) or by `forgetAll`. */
  private drops = 0;
  /** Reads under way, by drops, generation and key hash (`findByHash`). */
  private readonly reads = new Map<string, Promise<KeyForAuth | undefined>>();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly watch: Pick<CommitWatch, 'current'> | Pick<SharedGeneration, 'current'> | null,
    maxBytes = cacheBudgets(DEFAULT_CACHE_MAX_MB).keyRows,
  ) {
    this.rows = new Lru(maxBytes, cachedRowBytes);
  }

  /**
   * The row of `keyHash` as read earlier, with the generation it was read under, for a caller that
   * learns the current generation by other means (`authenticateApiKey`, from the rate limiter's
   * count): it may serve the row only if that generation is the same. Nothing for a key not read
   * yet, or whose rows were dropped.
   */
  remembered(keyHash: string): { generation: number | string; row: KeyForAuth } | undefined {
    return this.rows.get(keyHash);
  }

  /**
   * Changes whenever the rows are dropped. A caller of `remembered` reads it before and after it
   * learns the generation: if it changed in between, the row may not be served, whatever the
   * generation says.
   */
  get epoch(): number {
    return this.drops;
  }

  /**
   * Drops every row, for when the generation's history was lost: a Redis connection closed, and
   * what it reconnects to (a replica promoted in a failover) may lack the last bumps, so a value
   * some row was read under may come back although a write happened since.
   */
  forgetAll(): void {
    this.drops += 1;
    this.rows.clear();
  }

  async findByHash(keyHash: string): Promise<KeyForAuth | undefined> {
    if (this.watch === null) return apiKeyRepository.findForAuthByHash(this.db, keyHash);
    // Taken before the read: a commit after this point changes the generation the next lookup sees.
    const drops = this.drops;
    const generation = await this.watch.current();
    if (generation === null) {
      // Unknown (Redis away): a write meanwhile could not bump the generation it comes back with,
      // so no row read before this point may be served again, whatever the generation says then.
      this.forgetAll();
      return apiKeyRepository.findForAuthByHash(this.db, keyHash);
    }
    const cached = this.rows.get(keyHash);
    if (cached !== undefined && cached.generation === generation) return cached.row;

    // Requests that learnt the same generation share one read: it began after that generation was
    // seen, so it holds every commit they must see. After a commit, the requests of one turn of the
    // event loop would otherwise each read the row again.
    const flight = `${drops}\n${generation}\n${keyHash}`;
    const inFlight = this.reads.get(flight);
    if (inFlight !== undefined) return inFlight;
    const read = this.read(keyHash, generation, drops).finally(() => this.reads.delete(flight));
    this.reads.set(flight, read);
    return read;
  }

  private async read(
    keyHash: string,
    generation: number | string,
    drops: number,
  ): Promise<KeyForAuth | undefined> {
    const row = await apiKeyRepository.findForAuthByHash(this.db, keyHash);
    if (row === undefined) {
      this.rows.delete(keyHash);
      return undefined;
    }
    // Nor may a row that was being read while they were dropped.
    if (this.drops === drops) this.rows.set(keyHash, { generation, row });
    return row;
  }
}
