import type { Kysely } from 'kysely';
import type { CommitCounter } from '../db/store.ts';
import { apiKeyRepository, type KeyForAuth } from '../db/repositories/api-keys.ts';
import type { Database } from '../db/schema.ts';
import { cacheBudgets, DEFAULT_CACHE_MAX_MB } from '../config.ts';
import { ENTRY_OVERHEAD_BYTES, Lru, recordBytes } from '../lib/lru.ts';
import type { SharedGeneration } from './shared-generation.ts';

/**
 * How long a row may be served without being read again, whatever the watch says. The watch is
 * exact only if every writer tells it: a writer cut off from Redis (a CLI run, a panel whose
 * instance lost Redis) or killed between its commit and its bump leaves the shared generation
 * unchanged, and an instance whose own connection stayed up has no outage to drop its rows for
 * (`forgetAll`). Such an instance sees the change within this age of the commit.
 *
 * Why 5 s: a CLI command that cannot reach Redis waits up to 3 s for it before it warns, so every
 * instance has the change about 2 s after the operator reads the warning, well before a revoked key
 * could be checked by hand. Each key in use costs an instance one indexed read per 5 s, where
 * without the rows it costs one per request: one request in about 8,000 for a key at 1,600
 * requests a second (measured on PostgreSQL with Redis), and at 1 request a second still 4 reads
 * in 5 saved. A longer age would save almost nothing more and leave a revoked key working longer.
 */
export const KEY_ROW_MAX_AGE_MS = 5_000;

/** `readAt`: the time (ms) of the request the row was read for, taken before the read began. */
type CachedRow = { generation: number | string; row: KeyForAuth; readAt: number };

/**
 * Whether a row read at `readAt` may still be served at `now`. A clock that went back counts as
 * too old: the age can no longer be told.
 */
const young = (cached: CachedRow, now: number) => {
  const age = now - cached.readAt;
  return age >= 0 && age < KEY_ROW_MAX_AGE_MS;
};

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
 * lookup reads the store. Whatever the watch says, a row is read again once it is
 * `KEY_ROW_MAX_AGE_MS` old. Unknown keys are never kept, so guessing keys cannot fill the memory.
 *
 * Callers pass the time of the request (`now`, in ms) that they read anyway, so the age costs the
 * hot path a subtraction and two comparisons, no clock read; tests pass a clock of their own.
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

  private readonly db: Kysely<Database>;
  private readonly watch: CommitCounter | Pick<SharedGeneration, 'current'> | null;

  constructor(
    db: Kysely<Database>,
    watch: CommitCounter | Pick<SharedGeneration, 'current'> | null,
    maxBytes = cacheBudgets(DEFAULT_CACHE_MAX_MB).keyRows,
  ) {
    this.db = db;
    this.watch = watch;
    this.rows = new Lru(maxBytes, cachedRowBytes);
  }

  /**
   * The row of `keyHash` as read earlier, with the generation it was read under, for a caller that
   * learns the current generation by other means (`authenticateApiKey`, from the rate limiter's
   * count): it may serve the row only if that generation is the same. Nothing for a key not read
   * yet, whose rows were dropped, or whose row is too old at `now` to be served whatever the
   * generation (`KEY_ROW_MAX_AGE_MS`).
   */
  remembered(
    keyHash: string,
    now = Date.now(),
  ): { generation: number | string; row: KeyForAuth } | undefined {
    const cached = this.rows.get(keyHash);
    return cached !== undefined && young(cached, now) ? cached : undefined;
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

  /** `now`: the time of the request, in ms (`KEY_ROW_MAX_AGE_MS`). */
  async findByHash(keyHash: string, now = Date.now()): Promise<KeyForAuth | undefined> {
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
    if (cached !== undefined && cached.generation === generation && young(cached, now)) return cached.row;

    // Requests that learnt the same generation share one read: it began after that generation was
    // seen, so it holds every commit they must see. After a commit, the requests of one turn of the
    // event loop would otherwise each read the row again. A request that joins a read begun for an
    // earlier one keeps to the age all the same: the row is stamped with the earlier time.
    const flight = `${drops}\n${generation}\n${keyHash}`;
    const inFlight = this.reads.get(flight);
    if (inFlight !== undefined) return inFlight;
    const read = this.read(keyHash, generation, drops, now).finally(() => this.reads.delete(flight));
    this.reads.set(flight, read);
    return read;
  }

  private async read(
    keyHash: string,
    generation: number | string,
    drops: number,
    readAt: number,
  ): Promise<KeyForAuth | undefined> {
    const row = await apiKeyRepository.findForAuthByHash(this.db, keyHash);
    if (row === undefined) {
      this.rows.delete(keyHash);
      return undefined;
    }
    // Nor may a row that was being read while they were dropped.
    if (this.drops === drops) this.rows.set(keyHash, { generation, row, readAt });
    return row;
  }
}
