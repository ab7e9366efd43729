import type { Insertable, Kysely } from 'kysely';
import { auditRepository } from '../db/repositories/audit-events.ts';
import {
  type AcknowledgedRecord,
  type LeasedEndpointRow,
  webhookRepository,
} from '../db/repositories/webhooks.ts';
import type { Database, WebhookAttemptsTable } from '../db/schema.ts';
import type { SentAttempt } from './attempt.ts';
import { attemptLogRow } from './delivery-log.ts';
import { type Known, knows, recordKey, type StoredAcknowledged } from './fetch-batch.ts';
import type { EventChange } from './payload.ts';
import { retryWaitMs } from './retry.ts';

/**
 * The record of outcomes: what a worker did is kept as `Progress` until it is written, in one
 * transaction with the position, so that a crash loses none of it relative to the position. The
 * position moves only past an accepted event (2xx) or one the filter leaves out; a failure holds
 * the endpoint at its event, with the retry's time written beside the attempt; a 410, or failing
 * for WEBHOOK_DISABLE_AFTER_HOURS, disables it.
 */

/** What a worker did and has not yet written to its endpoint's row. */
export interface Progress {
  /** The seq up to which every event was accepted (or left out by the filter). */
  position: number;
  attempts: Insertable<WebhookAttemptsTable>[];
  last: { status: number | null; at: string } | null;
  /** Whether an event was accepted: the endpoint is no longer failing. */
  recovered: boolean;
  /** Records the receiver now knows (accepted, or left out by the filter) past the floor, by `recordKey`. */
  acknowledged: Map<string, AcknowledgedRecord>;
  /** Records it knew that left the view, by `recordKey`. */
  forgotten: Map<string, Pick<AcknowledgedRecord, 'record_type' | 'record_id'>>;
  /** The new floor (`known_through`) after a whole read; then every acknowledged record is forgotten. */
  knownThrough: number | null;
  /** After a failed attempt: when the retry goes, written with the attempt. */
  retry: { failing_since: string; failed_attempts: number; next_attempt_at: string } | null;
}

export function newProgress(position: number): Progress {
  return {
    position,
    attempts: [],
    last: null,
    recovered: false,
    acknowledged: new Map(),
    forgotten: new Map(),
    knownThrough: null,
    retry: null,
  };
}

/**
 * The receiver heard of `change` (accepted it, or its filter left it out), and the position moves
 * past it: a record it did not know becomes known; a record it knew that left the view is forgotten.
 */
export function passed(progress: Progress, known: Known, change: EventChange): void {
  progress.position = change.seq;
  const key = recordKey(change.type, change.id);
  if (change.op === 'delete') {
    progress.acknowledged.delete(key);
    if (known.acknowledged.has(key))
      progress.forgotten.set(key, { record_type: change.type, record_id: change.id });
  } else if (!knows(known, change)) {
    progress.forgotten.delete(key);
    progress.acknowledged.set(key, {
      record_type: change.type,
      record_id: change.id,
      created_seq: change.createdSeq,
    });
  }
}

/** After an attempt the receiver answered (or failed to): go on with the batch, or stop it. */
export type Verdict =
  | { next: 'continue' }
  /** `failingSince`: when the endpoint's failure began, for the mail once it lasts an hour. */
  | { next: 'retry'; failingSince: string }
  | { next: 'disable'; reason: string };

export interface OutcomeContext {
  row: Pick<LeasedEndpointRow, 'id' | 'failing_since' | 'failed_attempts'>;
  known: Known;
  /** Whether an event of this batch was accepted before: the endpoint's failure, if any, is over. */
  recovered: boolean;
  disableAfterHours: number;
}

/** Records `attempt` of `change` in `progress`, and says what follows. */
export function recordOutcome(
  progress: Progress,
  change: EventChange,
  attempt: SentAttempt,
  { row, known, recovered, disableAfterHours }: OutcomeContext,
): Verdict {
  const { result, at } = attempt;
  progress.attempts.push(
    attemptLogRow({
      endpointId: row.id,
      webhookId: attempt.webhookId,
      type: attempt.type,
      seq: change.seq,
      at,
      request: attempt.request,
      result,
      outcome: attempt.outcome,
    }),
  );
  progress.last = { status: result.status, at: at.toISOString() };
  if (attempt.outcome === 'success') {
    progress.recovered = true;
    passed(progress, known, change);
    return { next: 'continue' };
  }
  // A 410 disables the endpoint at once, failing for longer than WEBHOOK_DISABLE_AFTER_HOURS too.
  const failingSince = recovered || row.failing_since === null ? at.toISOString() : row.failing_since;
  const failures = recovered ? 1 : row.failed_attempts + 1;
  if (result.status === 410)
    return { next: 'disable', reason: `the receiver answered 410 Gone (${at.toISOString()})` };
  if (at.getTime() - Date.parse(failingSince) >= disableAfterHours * 3_600_000)
    return {
      next: 'disable',
      reason: `failing since ${failingSince} (last: ${result.error ?? 'no answer'})`,
    };
  // From the attempt's end as the delivery log records it (`at` + `duration_ms`): counted from its
  // start, a timeout (10 s by default) would already have used up the first step (about 5 s), and
  // the retry would leave at once.
  const next = new Date(at.getTime() + result.durationMs + retryWaitMs(failures, result.retryAfterMs));
  progress.retry = {
    failing_since: failingSince,
    failed_attempts: failures,
    next_attempt_at: next.toISOString(),
  };
  return { next: 'retry', failingSince };
}

/**
 * Writes `progress` (the position, the attempts, the last status, what the receiver now knows) in
 * one transaction, while `token` still holds the endpoint's lease; false when it no longer does.
 * `stored`: what the endpoint's `webhook_acknowledged` holds, so that nothing is deleted from an
 * empty one.
 */
export async function writeProgress(
  db: Kysely<Database>,
  endpointId: string,
  token: string,
  progress: Progress,
  stored: StoredAcknowledged,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const applied = await webhookRepository.updateLeased(trx, endpointId, token, {
      position: progress.position,
      ...(progress.knownThrough === null ? {} : { known_through: progress.knownThrough }),
      ...(progress.last === null
        ? {}
        : { last_attempt_at: progress.last.at, last_status: progress.last.status }),
      ...(progress.recovered ? { failing_since: null, failed_attempts: 0, next_attempt_at: null } : {}),
      ...(progress.retry ?? {}),
      updated_at: new Date().toISOString(),
    });
    if (!applied) return false;
    await webhookRepository.recordAttempts(trx, progress.attempts);
    if (progress.knownThrough !== null) {
      // Every record acknowledged entered the view by the new floor: the floor covers them all,
      // so none is added, and nothing is deleted when nothing is held.
      if (stored !== 'empty') await webhookRepository.forgetAcknowledged(trx, endpointId);
    } else {
      await webhookRepository.forgetAcknowledged(trx, endpointId, [...progress.forgotten.values()]);
      await webhookRepository.acknowledge(trx, endpointId, [...progress.acknowledged.values()]);
    }
    return true;
  });
}

/**
 * What `webhook_acknowledged` holds once `progress` was written: nothing after a new floor, some
 * records once any was added; otherwise what it held before. Only the lease holder writes the set.
 */
export function storedAfter(progress: Progress, before: StoredAcknowledged): StoredAcknowledged {
  if (progress.knownThrough !== null) return 'empty';
  return progress.acknowledged.size > 0 ? 'held' : before;
}

/**
 * Disables the endpoint for `reason` and gives up its lease, with an audit event: the time written,
 * or null (nothing done) if `token` lost it.
 */
export async function disableEndpoint(
  db: Kysely<Database>,
  row: Pick<LeasedEndpointRow, 'id' | 'account_id'>,
  token: string,
  reason: string,
): Promise<string | null> {
  const stamp = new Date().toISOString();
  return db.transaction().execute(async (trx) => {
    const held = await webhookRepository.updateLeased(trx, row.id, token, {
      state: 'disabled',
      disabled_reason: reason,
      lease_owner: null,
      lease_expires_at: null,
      updated_at: stamp,
    });
    if (!held) return null;
    await auditRepository.insert(trx, {
      account_id: row.account_id,
      subject_type: 'webhook_endpoint',
      subject_id: row.id,
      actor: 'system',
      action: 'disabled',
      detail: reason,
      created_at: stamp,
    });
    return stamp;
  });
}
