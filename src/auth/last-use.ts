import type { Kysely } from 'kysely';
import { apiKeyRepository } from '../db/repositories/api-keys.ts';
import type { Database } from '../db/schema.ts';

/**
 * Records when each key was last used without a database write per request: uses are kept in
 * memory and written in one pass every few seconds, and once more when the server stops.
 */
export class LastUseRecorder {
  private pending = new Map<string, Date>();
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();

  private readonly db: Kysely<Database>;
  private readonly onError: (error: unknown) => void;

  constructor(db: Kysely<Database>, onError: (error: unknown) => void, intervalMs = 5000) {
    this.db = db;
    this.onError = onError;
    // On its own: flush() never rejects (a failed write is kept for the next pass and reported).
    this.timer = setInterval(() => void this.flush(), intervalMs);
    this.timer.unref();
  }

  record(keyId: string, at: Date): void {
    this.pending.set(keyId, at);
  }

  /** Writes every pending use; safe to call at any time, writes run one after another. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      if (this.pending.size === 0) return;
      const batch = this.pending;
      this.pending = new Map();
      const entries = [...batch];
      for (const [index, [keyId, at]] of entries.entries()) {
        try {
          await apiKeyRepository.recordLastUse(this.db, keyId, at.toISOString());
        } catch (error) {
          // The store may be busy or down (a long import holds SQLite's write lock, PostgreSQL
          // is away): keep the unwritten uses for the next pass, each merged with any use of the
          // same key recorded meanwhile, the later one winning.
          for (const [unwrittenKeyId, unwrittenAt] of entries.slice(index)) {
            const meanwhile = this.pending.get(unwrittenKeyId);
            if (meanwhile === undefined || meanwhile < unwrittenAt)
              this.pending.set(unwrittenKeyId, unwrittenAt);
          }
          this.onError(error);
          return;
        }
      }
    });
    return this.flushing;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
