import type { LeasedEndpointRow } from '../db/repositories/webhooks.ts';
import { leaseCovers } from './lease.ts';

/**
 * The plan check: from the endpoint's row (read under the lease) and what the worker knows, whether
 * the step reads the feed now, waits, or disables the endpoint. Decides only; the worker does it.
 */

export type Check =
  /** Sleep until woken (`ms` null), or at most `ms`. */
  | { next: 'wait'; ms: number | null }
  /** Disable the endpoint, for `reason`, and end the worker. */
  | { next: 'disable'; reason: string }
  /** Read the changes after the position and deliver them. */
  | { next: 'read' };

const RETENTION_REASON =
  'its position is older than the changes feed keeps (CHANGES_RETENTION_DAYS): resend from latest to restart it';

export interface CheckInput {
  row: Pick<
    LeasedEndpointRow,
    'api_access' | 'position' | 'purged_seq' | 'next_attempt_at' | 'head' | 'failing_since'
  >;
  /** Whether the account's data may have changed since the worker last read the feed. */
  readDue: boolean;
  /** Until when the lease holds (ms since the epoch). */
  leaseUntil: number;
  timeoutMs: number;
  leaseSeconds: number;
  now: number;
}

export function planCheck({ row, readDue, leaseUntil, timeoutMs, leaseSeconds, now }: CheckInput): Check {
  // Without API access, nothing leaves; the position waits for the plan to come back.
  if (row.api_access !== 1) return { next: 'wait', ms: null };
  if (row.position < row.purged_seq) return { next: 'disable', reason: RETENTION_REASON };
  const retryAt = row.next_attempt_at === null ? 0 : Date.parse(row.next_attempt_at);
  if (retryAt > now) return { next: 'wait', ms: retryAt - now };
  // Woken by a commit that added nothing for it (another account's, a delivery's own): sleep on.
  if ((!readDue || row.head <= row.position) && row.failing_since === null) return { next: 'wait', ms: null };
  // A POST must not outlast the lease: wait for the next renewal.
  if (!leaseCovers(leaseUntil, timeoutMs, now)) return { next: 'wait', ms: (leaseSeconds * 1000) / 3 };
  return { next: 'read' };
}
