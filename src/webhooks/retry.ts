/**
 * When a failed event is tried again: RETRY_SCHEDULE_S with ±20% jitter, counted by the endpoint's
 * failures in a row, or later when the receiver asks for more (`Retry-After`).
 */

/** Seconds before the n-th retry (the last one repeats), each with ±20% jitter. */
export const RETRY_SCHEDULE_S = [5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600];
const JITTER = 0.2;
/** How much later than its schedule a receiver's `Retry-After` may put a retry. */
const RETRY_AFTER_MAX_EXTRA_MS = 3_600_000;

/** The delay before the retry that follows the `failures`-th failure, jittered. */
export function retryDelayMs(failures: number, random: () => number = Math.random): number {
  const base = RETRY_SCHEDULE_S[Math.min(failures, RETRY_SCHEDULE_S.length) - 1] ?? 5;
  return Math.round(base * 1000 * (1 - JITTER + 2 * JITTER * random()));
}

/**
 * The wait before the retry that follows the `failures`-th failure: the schedule's, or longer when
 * the receiver asked for more (`Retry-After`), but never more than RETRY_AFTER_MAX_EXTRA_MS beyond
 * the schedule: a receiver cannot park an endpoint for days.
 */
export function retryWaitMs(
  failures: number,
  askedMs: number | null,
  random: () => number = Math.random,
): number {
  const scheduled = retryDelayMs(failures, random);
  return askedMs === null
    ? scheduled
    : Math.max(scheduled, Math.min(askedMs, scheduled + RETRY_AFTER_MAX_EXTRA_MS));
}
