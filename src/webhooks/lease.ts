import type { Kysely } from 'kysely';
import { type LeasedEndpointRow, webhookRepository } from '../db/repositories/webhooks.ts';
import type { Database } from '../db/schema.ts';

/**
 * Leases: one instance delivers for an endpoint, the one holding its lease (`lease_owner`,
 * `lease_expires_at`). A claim takes free endpoints under a token of its own (`INSTANCE/N`); the
 * holder renews them every third of WEBHOOK_LEASE_SECONDS, and every write of a worker applies only
 * while the endpoint is still held under its token.
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
 * allows one).
 */
export function leaseCovers(until: number, timeoutMs: number, now = Date.now()): boolean {
  return now + timeoutMs < until;
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

/** Extends the leases of `held` to `until`; the ids still held (the others are lost). */
export async function renewLeases(
  db: Kysely<Database>,
  held: readonly HeldEndpoint[],
  until: number,
): Promise<Set<string>> {
  const ids = await webhookRepository.renewLeases(
    db,
    held.map(({ id, token }) => ({ id, owner: token })),
    new Date(until).toISOString(),
  );
  return new Set(ids);
}

/** Whether any active endpoint is free to claim at `now`: a read, so that an idle look costs no write. */
export async function anyFree(db: Kysely<Database>, now: number): Promise<boolean> {
  return webhookRepository.anyClaimable(db, new Date(now).toISOString());
}

/**
 * Claims the endpoints free at `now` (never leased, released, or whose lease ran out) under
 * `token`, a claim's own, until `until`, and yields each as it is read back.
 */
export async function* claim(
  db: Kysely<Database>,
  token: string,
  now: number,
  until: number,
): AsyncGenerator<LeasedEndpointRow> {
  const claimed = await webhookRepository.claim(
    db,
    token,
    new Date(now).toISOString(),
    new Date(until).toISOString(),
    CLAIM_LIMIT,
  );
  for (const id of claimed) {
    const row = await webhookRepository.findLeased(db, id, token);
    if (row !== undefined) yield row;
  }
}

/** Gives up every lease the instance holds, whatever claim it came with: another instance may take them at once. */
export async function releaseAll(db: Kysely<Database>, instanceId: string): Promise<void> {
  await webhookRepository.release(db, instanceId);
}
