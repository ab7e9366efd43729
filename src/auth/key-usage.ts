import type { Kysely } from 'kysely';
import { type KeyUsageRow, keyUsageRepository } from '../db/repositories/key-usage.ts';
import type { Database } from '../db/schema.ts';

/** How long hourly usage is kept (docs/design.md, "Key usage"). */
export const USAGE_RETENTION_DAYS = 30;
const HOUR_MS = 3600 * 1000;

export type UsageClass = 'ok' | 'client_errors' | 'rate_limited';

/** 2xx and 304 succeed; 429 is rate limited; any other 4xx is the client's error; 5xx is ours, not counted. */
export function usageClass(status: number): UsageClass | null {
  if (status === 429) return 'rate_limited';
  if ((status >= 200 && status < 300) || status === 304) return 'ok';
  if (status >= 400 && status < 500) return 'client_errors';
  return null;
}

/** The start of the hour (UTC) of `at`, as stored. */
export function hourOf(at: number): string {
  return new Date(at - (at % HOUR_MS)).toISOString();
}

/**
 * Counts the public API's requests per key, hour and class without a database write per request:
 * the counts are kept in memory and added to the hourly rows every `intervalMs` and once more when
 * the server stops (`close`), like `LastUseRecorder`. Rows are added to, never replaced, so every
 * instance's counts sum. Each flush also deletes, at most once an hour, the rows past retention.
 */
export class KeyUsageRecorder {
  /** Per key, per hour (epoch ms of its start): keyed by value, so counting allocates nothing. */
  private pending = new Map<string, Map<number, KeyUsageRow>>();
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();
  private purgedAt = Number.NEGATIVE_INFINITY;
  private readonly now: () => number;

  private readonly db: Kysely<Database>;
  private readonly onError: (error: unknown) => void;

  constructor(
    db: Kysely<Database>,
    onError: (error: unknown) => void,
    { intervalMs = 10_000, now = Date.now }: { intervalMs?: number; now?: () => number } = {},
  ) {
    this.db = db;
    this.onError = onError;
    this.now = now;
    // On its own: flush() never rejects (a failed write is kept for the next pass and reported).
    this.timer = setInterval(() => void this.flush(), intervalMs);
    this.timer.unref();
  }

  /** Counts one answered request of `keyId` with HTTP `status`, in the hour of `at` (epoch ms). */
  record(keyId: string, status: number, at: number): void {
    const kind = usageClass(status);
    if (kind === null) return;
    const hour = at - (at % HOUR_MS);
    let hours = this.pending.get(keyId);
    if (hours === undefined) {
      hours = new Map();
      this.pending.set(keyId, hours);
    }
    let row = hours.get(hour);
    if (row === undefined) {
      row = { key_id: keyId, hour: new Date(hour).toISOString(), ok: 0, client_errors: 0, rate_limited: 0 };
      hours.set(hour, row);
    }
    row[kind] += 1;
  }

  /** Adds every pending count to the store; safe to call at any time, flushes run one after another. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      const batch = this.pending;
      this.pending = new Map();
      try {
        // One transaction, so that a failed flush wrote nothing and can be retried whole.
        const rows = [...batch.values()].flatMap((hours) => [...hours.values()]);
        if (rows.length > 0) await this.db.transaction().execute((trx) => keyUsageRepository.add(trx, rows));
      } catch (error) {
        // The store may be busy or down: the counts wait for the next pass, added to those recorded
        // meanwhile.
        this.restore(batch);
        this.onError(error);
        return;
      }
      const now = this.now();
      if (now - this.purgedAt < HOUR_MS) return;
      try {
        await keyUsageRepository.purgeBefore(this.db, hourOf(now - USAGE_RETENTION_DAYS * 24 * HOUR_MS));
        this.purgedAt = now;
      } catch (error) {
        this.onError(error);
      }
    });
    return this.flushing;
  }

  private restore(batch: Map<string, Map<number, KeyUsageRow>>): void {
    for (const [keyId, hours] of batch) {
      for (const [hour, row] of hours) {
        const meanwhile = this.pending.get(keyId)?.get(hour);
        if (meanwhile === undefined) {
          this.pending.set(keyId, (this.pending.get(keyId) ?? new Map()).set(hour, row));
        } else {
          meanwhile.ok += row.ok;
          meanwhile.client_errors += row.client_errors;
          meanwhile.rate_limited += row.rate_limited;
        }
      }
    }
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
