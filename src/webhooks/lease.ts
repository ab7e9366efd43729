import { performance } from 'node:perf_hooks';
import type { Kysely } from 'kysely';
import { type LeasedEndpointRow, webhookRepository } from '../db/repositories/webhooks.ts';
import type { Database } from '../db/schema.ts';

/**
 * Leases: one instance delivers for an endpoint, the one holding its lease (`lease_owner`,
 * `lease_expires_at`). A claim takes free endpoints under a token of its own (`INSTANCE/N`); the
 * holder renews them every third of WEBHOOK_LEASE_SECONDS, and every write of a worker applies only
 * while the endpoint is still held under its token. Expiry is set and compared on the database's
 * clock (src/db/database-time.ts), never an instance's: an instance whose clock is off, or whose
 * event loop stalled, cannot take a lease another holds. Before each POST the worker checks again
 * that it holds the lease with time enough left (`checkBeforeSend`).
 */

/** Endpoints one instance takes per claim. */
const CLAIM_LIMIT = 500;

/** An endpoint held under a claim's token. */
export interface HeldEndpoint {
  id: string;
  token: string;
}

/** How often the leases held are renewed: a third of WEBHOOK_LEASE_SECONDS, at least 200 ms. */
export function renewalPeriodMs(leaseSeconds: number): number {
  return Math.max(200, (leaseSeconds * 1000) / 3);
}

/**
 * Whether a POST started at `now` ends, timeout included, before a lease held until `until` could
 * run out (the configuration keeps the lease at least twice the timeout, so a renewed lease always
 * allows one). Both on the instance's monotonic clock (`performance.now()`), from what the
 * database said of the lease's time left: an instance's wall clock plays no part.
 */
export function leaseCovers(until: number, timeoutMs: number, now = performance.now()): boolean {
  return now + timeoutMs < until;
}

/** What the check before a POST found. */
export type SendCheck =
  /** Send: the lease is held; `until` is when it runs out, on `performance.now()`'s clock. */
  | { send: true; until: number }
  /** Do not send, and end: the lease is another's or nobody's, the endpoint disabled, deleted or moved. */
  | { send: false; lost: true; reason: string }
  /** Do not send yet: the lease, still held, has too little time left for the POST's timeout. */
  | { send: false; lost: false; reason: string };

/**
 * The check before each POST, one read by the endpoint's key: the lease is still held under
 * `held.token`, the endpoint still active and at `position` (where this worker last read or wrote
 * it: a skip, a resend or an edit made through any instance moves it or ends the lease), and the
 * lease has more than `timeoutMs` left on the database's clock. A disable, a skip or a deletion
 * made through another instance therefore stops the next POST, not only the next write.
 */
export async function checkBeforeSend(
  db: Kysely<Database>,
  held: HeldEndpoint,
  position: number,
  timeoutMs: number,
): Promise<SendCheck> {
  // The time left is counted from before the read: never more than the database gave.
  const asked = performance.now();
  const standing = await webhookRepository.leaseStanding(db, held.id);
  if (standing === undefined) return { send: false, lost: true, reason: 'the endpoint was deleted' };
  if (standing.lease_owner !== held.token || standing.lease_expires_at === null)
    return { send: false, lost: true, reason: 'the lease is no longer held' };
  if (standing.state !== 'active') return { send: false, lost: true, reason: 'the endpoint was disabled' };
  if (Number(standing.position) !== position)
    return { send: false, lost: true, reason: "the endpoint's position was moved" };
  const left = Date.parse(standing.lease_expires_at) - Date.parse(standing.database_now);
  if (!(left > timeoutMs))
    return {
      send: false,
      lost: false,
      reason: "the lease would run out before its timeout, on the database's clock",
    };
  return { send: true, until: asked + left };
}

/**
 * A worker's first step: its endpoint as the store has it (with its account's feed head, purge mark
 * and plan) while still held under `held.token` and active; null when the worker must end (lease
 * lost or released, endpoint disabled or deleted).
 */
export async function leasedEndpoint(
  db: Kysely<Database>,
  held: HeldEndpoint,
): Promise<LeasedEndpointRow | null> {
  const row = await webhookRepository.findLeased(db, held.id, held.token);
  return row === undefined || row.state !== 'active' ? null : row;
}

/** Extends the leases of `held` by `leaseMs` on the database's clock; the ids still held (the others are lost). */
export async function renewLeases(
  db: Kysely<Database>,
  held: readonly HeldEndpoint[],
  leaseMs: number,
): Promise<Set<string>> {
  const ids = await webhookRepository.renewLeases(
    db,
    held.map(({ id, token }) => ({ id, owner: token })),
    leaseMs,
  );
  return new Set(ids);
}

/** Whether any active endpoint is free to claim, on the database's clock: a read, so that an idle look costs no write. */
export async function anyFree(db: Kysely<Database>): Promise<boolean> {
  return webhookRepository.anyClaimable(db);
}

/**
 * Claims the endpoints free now on the database's clock (never leased, released, or whose lease ran
 * out) under `token`, a claim's own, for `leaseMs` on that clock, and yields each as it is read back.
 */
export async function* claim(
  db: Kysely<Database>,
  token: string,
  leaseMs: number,
): AsyncGenerator<LeasedEndpointRow> {
  const claimed = await webhookRepository.claim(db, token, leaseMs, CLAIM_LIMIT);
  for (const id of claimed) {
    const row = await webhookRepository.findLeased(db, id, token);
    if (row !== undefined) yield row;
  }
}

/** Gives up every lease the instance holds, whatever claim it came with: another instance may take them at once. */
export async function releaseAll(db: Kysely<Database>, instanceId: string): Promise<void> {
  await webhookRepository.release(db, instanceId);
}
