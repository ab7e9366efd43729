import { randomUUID } from 'node:crypto';
import { setTimeout as pause } from 'node:timers/promises';
import type { Insertable, Kysely } from 'kysely';
import pg from 'pg';
import { Counter, Gauge, Histogram, type Metric } from 'prom-client';
import type { CommitWatch } from '../db/commit-watch.ts';
import { auditRepository } from '../db/repositories/audit-events.ts';
import { WEBHOOK_CHANNEL } from '../db/repositories/notifications.ts';
import {
  type AcknowledgedRecord,
  type LeasedEndpointRow,
  webhookRepository,
} from '../db/repositories/webhooks.ts';
import type { Database, WebhookAttemptsTable } from '../db/schema.ts';
import { isStoreUnavailable } from '../db/store-health.ts';
import { changeCursors } from '../services/change-cursor.ts';
import { changeFeedService } from '../services/change-feed-service.ts';
import { signingSecrets } from '../services/webhook-service.ts';
import { inSpan } from '../telemetry/tracing.ts';
import { matchesFilter } from './events.ts';
import { DeliveryGovernor } from './governor.ts';
import type { OutboundClient, PostResult } from './outbound.ts';
import { changeEventBody, type EventChange, eventType } from './payload.ts';
import { changeWebhookId, signedHeaders, signingKeys } from './signing.ts';

/**
 * The delivery of webhooks (docs/design.md, "Webhooks"; docs/webhooks.md): each server instance runs a
 * `WebhookDispatcher`, which holds leases on endpoints and runs one `EndpointWorker` per endpoint
 * it holds.
 *
 * - One instance per endpoint: an endpoint is delivered for by the instance holding its lease
 *   (`lease_owner`, `lease_expires_at`). The holder renews its leases every third of
 *   WEBHOOK_LEASE_SECONDS; an instance that dies stops renewing, and another one takes its
 *   endpoints once the lease has run out. Every write of the loop is conditional on the lease, so
 *   an instance that lost it stops at its next write, and none starts a POST that could outlast it.
 * - In order, at least once: the worker reads the changes after the endpoint's position, in feed
 *   order, and POSTs them one at a time. The position moves only after a 2xx (or past an event the
 *   filter leaves out), and is written at least every FLUSH_MS and at the end of each batch: a
 *   server killed meanwhile sends the unwritten ones again, with the same `webhook-id`. A write
 *   the store fails is tried again first, by the same worker, so a short outage sends nothing twice.
 * - The event type says what this endpoint was sent: a record's change is `updated` only if the
 *   endpoint acknowledged (2xx) a `created` or `updated` of it, or its filter left that event out,
 *   since the record last entered the view (its `created_seq`); `created` otherwise. The position
 *   cannot tell: other records' deliveries move it past a record's `created_seq` before the
 *   record's merged change is sent (issue 36 item 1). What the endpoint knows is a floor,
 *   `known_through` (every record that entered the view up to it is known), and the records
 *   acknowledged after it (`webhook_acknowledged`), written in the position's transaction. The
 *   floor moves up to the position when a read that held every change up to the head it read (not
 *   cut at the batch size) was delivered whole: each record that entered the view by then was sent
 *   at a seq at or after its entry, in that read or before it, so the set is emptied with it. In
 *   steady state (small reads delivered whole) the set stays empty and costs no query; it fills
 *   only while a read is cut short or a failure stops one, and empties at the next whole read.
 * - A failure holds the endpoint at that event (later ones wait, so order holds) and is retried on
 *   RETRY_SCHEDULE_S with jitter, counted from the end of the failed attempt; a 410 disables the
 *   endpoint at once, and so does failing for WEBHOOK_DISABLE_AFTER_HOURS, with the reason recorded
 *   and an audit event.
 * - No polling when idle: a worker sleeps until woken. On PostgreSQL writers NOTIFY at their commit
 *   (`notifyWebhooks`) and the dispatcher LISTENs on a connection of its own; on SQLite the commit
 *   watch (one 48-byte read of the WAL index, no SQL) tells when anything was committed.
 */

/** Seconds before the n-th retry (the last one repeats), each with ±20% jitter. */
export const RETRY_SCHEDULE_S = [5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600];
const JITTER = 0.2;
/** Changes read per batch. */
const BATCH = 200;
/** The position of a busy endpoint is written at least this often. */
const FLUSH_MS = 250;
/** How often SQLite's commit watch is looked at: a 48-byte read, no SQL. */
const COMMIT_WATCH_MS = 100;
/** The deliveries of one instance, in all, while its event loop is saturated by API requests (./governor.ts). */
const EVENTS_PER_SECOND_WHEN_BUSY = 100;
/** The pause before a worker tries again after the store failed it, on average. */
const STORE_RETRY_MS = 1000;
/** Endpoints one instance takes per claim. */
const CLAIM_LIMIT = 500;
/** Before an event that was not sent (`not_sent`) is tried again, on average. */
const NOT_SENT_RETRY_MS = 1000;
/** At most one warning per this period says that events wait for a free connection. */
const NOT_SENT_LOG_MS = 60_000;
/** Before reconnecting the LISTEN connection after it failed. */
const LISTEN_RETRY_MS = 1000;
/** How long a shutdown waits for the LISTEN connection to close. */
const LISTEN_END_MS = 1000;

const sleep = (ms: number) =>
  new Promise<void>((resolve) => {
    setTimeout(resolve, ms).unref();
  });

export interface DispatcherOptions {
  db: Kysely<Database>;
  store: 'sqlite' | 'postgres';
  /** SQLite in WAL mode: the commit watch; null otherwise. */
  commitWatch: CommitWatch | null;
  /** PostgreSQL: where the LISTEN connection goes. */
  databaseUrl: string;
  outbound: OutboundClient;
  secretsKey: Buffer | null;
  leaseSeconds: number;
  timeoutMs: number;
  disableAfterHours: number;
  /** Changes read per batch: BATCH, unless a test needs reads cut short sooner. */
  batchSize?: number;
  logger: {
    info(details: object, message: string): void;
    warn(details: object, message: string): void;
    error(details: object, message: string): void;
  };
}

/**
 * What an attempt came to. `not_sent`: the request never left, and not through the receiver's fault
 * (no free connection in time, or the lease would not cover it once it had one): nothing is recorded
 * against the endpoint, and the event is tried again after NOT_SENT_RETRY_MS.
 */
export type AttemptOutcome =
  'success' | 'http_error' | 'gone' | 'timeout' | 'network_error' | 'refused' | 'not_sent';

function outcomeOf(result: PostResult): AttemptOutcome {
  if (result.status !== null) {
    if (result.status >= 200 && result.status < 300) return 'success';
    return result.status === 410 ? 'gone' : 'http_error';
  }
  return result.failure ?? 'network_error';
}

/** The delay before the retry that follows the `failures`-th failure, jittered. */
export function retryDelayMs(failures: number, random: () => number = Math.random): number {
  const base = RETRY_SCHEDULE_S[Math.min(failures, RETRY_SCHEDULE_S.length) - 1] ?? 5;
  return Math.round(base * 1000 * (1 - JITTER + 2 * JITTER * random()));
}

/** How much later than its schedule a receiver's `Retry-After` may put a retry. */
const RETRY_AFTER_MAX_EXTRA_MS = 3_600_000;

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

class DeliveryMetrics {
  readonly attempts = new Counter({
    name: 'webhook_delivery_attempts_total',
    registers: [],
    help: 'Webhook delivery attempts made by this instance, by outcome',
    labelNames: ['outcome'],
  });
  readonly latency = new Histogram({
    name: 'webhook_delivery_latency_seconds',
    registers: [],
    help: 'From a change being committed to its event being accepted (2xx) by the receiver',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 6 * 3600, 24 * 3600],
  });
  readonly lag: Gauge;
  readonly oldest: Gauge;

  constructor(workers: () => Iterable<EndpointWorker>) {
    this.lag = new Gauge({
      name: 'webhook_endpoint_lag_events',
      registers: [],
      help: "Changes in the feed after an endpoint's position (held by this instance)",
      labelNames: ['endpoint'],
      collect() {
        this.reset();
        for (const worker of workers()) this.set({ endpoint: worker.id }, worker.lag());
      },
    });
    this.oldest = new Gauge({
      name: 'webhook_endpoint_oldest_undelivered_seconds',
      registers: [],
      help: 'Age of the oldest change not yet delivered to an endpoint (held by this instance); 0 when caught up',
      labelNames: ['endpoint'],
      collect() {
        this.reset();
        for (const worker of workers()) this.set({ endpoint: worker.id }, worker.oldestUndeliveredSeconds());
      },
    });
  }

  all(): Metric[] {
    return [this.attempts, this.latency, this.lag, this.oldest];
  }
}

/** Progress of a worker not yet written to its endpoint's row. */
interface Unwritten {
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

const recordKey = (type: string, id: string) => `${type}:${id}`;

/**
 * Whether the receiver knows the record of an upsert in its current life: it entered the view at or
 * before the floor, or the endpoint acknowledged it since (the same `created_seq`).
 */
function knows(floor: number, acknowledged: ReadonlyMap<string, number>, change: EventChange): boolean {
  return (
    change.createdSeq <= floor || acknowledged.get(recordKey(change.type, change.id)) === change.createdSeq
  );
}

/** Resolves at `ms` from now, or as soon as `wake` is called, whichever comes first. */
class Sleeper {
  private wakeUp: (() => void) | null = null;
  private pending = false;

  sleep(ms: number | null): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = ms === null ? null : setTimeout(() => done(), ms);
      const done = () => {
        if (timer !== null) clearTimeout(timer);
        this.wakeUp = null;
        resolve();
      };
      this.wakeUp = done;
    });
  }

  /** Wakes a sleeper, or makes the next sleep return at once. */
  wake(): void {
    if (this.wakeUp === null) this.pending = true;
    else this.wakeUp();
  }
}

/** The delivery loop of one endpoint, while this instance holds its lease. */
class EndpointWorker {
  private stopped = false;
  private readonly sleeper = new Sleeper();
  private readonly abort = new AbortController();
  /** Until when this instance's lease on the endpoint holds, as last renewed. */
  leaseUntil: number;
  private position = 0;
  private head = 0;
  /**
   * What was done since the position was last written: kept by the worker, not by one batch, so
   * that after a write the store failed (an outage, a full pool) the next step writes it first
   * instead of sending those events again.
   */
  private unwritten: Unwritten | null = null;
  /** When the first change after the position was made, while it waits; null when caught up. */
  private waitingSince: number | null = null;
  /** Whether the account's data may have changed since the last read. */
  private poked = true;
  /**
   * Whether the endpoint's `webhook_acknowledged` holds nothing: then a batch looks nothing up and a
   * floor write deletes nothing. Null until this worker's first floor write; only the lease holder
   * writes the set, so it stays true until this worker adds to it.
   */
  private acknowledgedEmpty: boolean | null = null;
  readonly done: Promise<void>;

  readonly id: string;
  readonly accountId: string;
  /**
   * The claim this worker delivers under (`INSTANCE/N`, the endpoint's `lease_owner`): every
   * write of the worker applies only while the endpoint is held under it, so a worker whose lease
   * was released (resend, disable) cannot write over the endpoint once it is claimed again, even
   * by the same instance.
   */
  readonly token: string;
  private readonly dispatcher: WebhookDispatcher;

  constructor(
    id: string,
    accountId: string,
    token: string,
    leaseUntil: number,
    dispatcher: WebhookDispatcher,
  ) {
    this.id = id;
    this.accountId = accountId;
    this.token = token;
    this.dispatcher = dispatcher;
    this.leaseUntil = leaseUntil;
    this.done = this.loop().catch((error: unknown) => {
      if (!isStoreUnavailable(error))
        dispatcher.options.logger.error({ err: error, endpoint: id }, 'webhook delivery loop failed');
      dispatcher.forget(this);
    });
  }

  lag(): number {
    return Math.max(0, this.head - this.position);
  }

  oldestUndeliveredSeconds(): number {
    return this.waitingSince === null || this.lag() === 0 ? 0 : (Date.now() - this.waitingSince) / 1000;
  }

  wake(): void {
    this.poked = true;
    this.sleeper.wake();
  }

  stop(): void {
    this.stopped = true;
    this.abort.abort();
    this.sleeper.wake();
  }

  /**
   * Whether a POST started now ends, timeout included, before the lease could run out (the
   * configuration keeps the lease at least twice the timeout, so a renewed lease always allows one).
   */
  private leaseHolds(): boolean {
    return Date.now() + this.dispatcher.options.timeoutMs < this.leaseUntil;
  }

  private get batchSize(): number {
    return this.dispatcher.options.batchSize ?? BATCH;
  }

  /** What was done since the last write, begun (if nothing was) at `position`, where that write left it. */
  private progress(position: number): Unwritten {
    return (this.unwritten ??= {
      position,
      attempts: [],
      last: null,
      recovered: false,
      acknowledged: new Map(),
      forgotten: new Map(),
      knownThrough: null,
      retry: null,
    });
  }

  /**
   * Steps until the endpoint is no longer this worker's. A step the store fails (an outage, a pool
   * queue that is full, SQLite's write lock held by an import) is tried again after a pause: the
   * lease is still held, and a worker that ended here would leave its endpoint undelivered.
   */
  private async loop(): Promise<void> {
    while (!this.stopped) {
      try {
        if (!(await this.step())) break;
      } catch (error) {
        if (!isStoreUnavailable(error)) throw error;
        // What was read before the failure may not have been delivered: read again.
        this.poked = true;
        // Jittered: workers the store failed together (a full pool) do not come back together.
        const wait = STORE_RETRY_MS * (0.5 + Math.random());
        await pause(wait, undefined, { signal: this.abort.signal }).catch(() => {});
      }
    }
    this.dispatcher.forget(this);
  }

  /** One read of the endpoint and, if there is something to send, one batch; false when the loop must end. */
  private async step(): Promise<boolean> {
    const { db } = this.dispatcher.options;
    const row = await webhookRepository.findLeased(db, this.id, this.token);
    if (row === undefined || row.state !== 'active') return false;
    // Events delivered before a write the store failed: their position goes first, and they are
    // not sent again (the lease, still this worker's, shows nobody else wrote meanwhile).
    if (this.unwritten !== null) return this.write();
    this.position = row.position;
    this.head = row.head;
    // Without API access, nothing leaves; the position waits for the plan to come back.
    if (row.api_access !== 1) {
      await this.sleeper.sleep(null);
      return true;
    }
    if (row.position < row.purged_seq) {
      await this.disable(
        row,
        'its position is older than the changes feed keeps (CHANGES_RETENTION_DAYS): resend from latest to restart it',
      );
      return false;
    }
    const retryAt = row.next_attempt_at === null ? 0 : Date.parse(row.next_attempt_at);
    if (retryAt > Date.now()) {
      await this.sleeper.sleep(retryAt - Date.now());
      return true;
    }
    // Woken by a commit that added nothing for it (another account's, a delivery's own): sleep on.
    if ((!this.poked || row.head <= row.position) && row.failing_since === null) {
      await this.sleeper.sleep(null);
      return true;
    }
    // A POST must not outlast the lease: wait for the next renewal.
    if (!this.leaseHolds()) {
      await this.sleeper.sleep((this.dispatcher.options.leaseSeconds * 1000) / 3);
      return true;
    }
    this.poked = false;
    const batch = await changeFeedService.after(db, row.account_id, row.position, this.batchSize);
    this.head = batch.head;
    if (batch.changes.length === 0) {
      this.waitingSince = null;
      // Seqs with no change left (a change to the account itself, records that changed again):
      // nothing to send up to the head, so the position moves there and the lag reads 0. No
      // record's latest change lies after the position, so each was sent (or known) since it
      // entered the view: the floor moves there too.
      if (batch.head > row.position) {
        const done = this.progress(row.position);
        done.position = batch.head;
        done.knownThrough = batch.head;
        if (!(await this.write())) return false;
        this.position = batch.head;
      }
      return true;
    }
    this.waitingSince = Date.parse(batch.changes[0]?.changed_at ?? '') || Date.now();
    const complete = batch.changes.length < this.batchSize;
    // More may follow at once: read again after this batch.
    if (!complete || (batch.changes.at(-1)?.seq ?? 0) < batch.head) this.poked = true;
    return this.deliver(row, batch.changes, complete);
  }

  /** What the endpoint acknowledged of the batch's records: one read, none while it holds nothing. */
  private async acknowledgedAmong(changes: EventChange[]): Promise<Map<string, number>> {
    if (this.acknowledgedEmpty === true) return new Map();
    const ids = [...new Set(changes.map((change) => change.id))];
    const rows = await webhookRepository.acknowledged(this.dispatcher.options.db, this.id, ids);
    return new Map(
      rows.map((record) => [recordKey(record.record_type, record.record_id), record.created_seq]),
    );
  }

  /**
   * The receiver heard of `change` (accepted it, or its filter left it out): a record it did not
   * know becomes known; a record it knew that left the view is forgotten.
   */
  private heard(
    done: Unwritten,
    floor: number,
    acknowledged: ReadonlyMap<string, number>,
    change: EventChange,
  ): void {
    const key = recordKey(change.type, change.id);
    if (change.op === 'delete') {
      done.acknowledged.delete(key);
      if (acknowledged.has(key)) done.forgotten.set(key, { record_type: change.type, record_id: change.id });
    } else if (!knows(floor, acknowledged, change)) {
      done.forgotten.delete(key);
      done.acknowledged.set(key, {
        record_type: change.type,
        record_id: change.id,
        created_seq: change.createdSeq,
      });
    }
  }

  /**
   * Delivers `changes` in order until one fails; false when the loop must end (lease lost, disabled,
   * stopped). `complete`: the read held every change up to the head it read (it was not cut at the
   * batch size).
   */
  private async deliver(row: LeasedEndpointRow, changes: EventChange[], complete: boolean): Promise<boolean> {
    const { db, outbound, secretsKey } = this.dispatcher.options;
    const metrics = this.dispatcher.metrics;
    const filter = JSON.parse(row.events) as string[];
    const keys = signingKeys(await signingSecrets(db, secretsKey, row, new Date()));
    const cursors = await changeCursors(db);
    const floor = row.known_through;
    const acknowledged = await this.acknowledgedAmong(changes);
    let position = row.position;
    let flushedAt = Date.now();
    // Whether an event of this batch was accepted: the endpoint's failure, if any, is over.
    let recovered = false;
    // Changes of this batch accepted or left out by the filter (a prefix of it, in feed order).
    let passed = 0;

    for (const change of changes) {
      if (this.stopped || !this.leaseHolds()) break;
      const type = eventType(change, knows(floor, acknowledged, change));
      if (!matchesFilter(filter, type)) {
        // Left out by the endpoint's choice: it counts as heard, as an accepted event does.
        position = change.seq;
        const done = this.progress(position);
        done.position = position;
        this.heard(done, floor, acknowledged, change);
        passed += 1;
        continue;
      }
      await this.dispatcher.governor.turn(this.abort.signal);
      if (this.stopped) break;
      const webhookId = changeWebhookId(row.id, change.seq);
      const cursor = cursors.encode(row.account_id, {
        position: change.seq,
        bound: change.seq,
        issuedAt: Math.floor(Date.now() / 1000),
      });
      const body = changeEventBody(type, change, cursor);
      const at = new Date();
      const headers = signedHeaders(webhookId, Math.floor(at.getTime() / 1000), body, keys);
      const result = await inSpan(
        'webhook.attempt',
        {
          kind: 'client',
          root: true,
          attributes: {
            'webhook.endpoint_id': row.id,
            'webhook.id': webhookId,
            'webhook.event_type': type,
          },
          describe: (answer) => {
            const outcome = outcomeOf(answer);
            return {
              ...(answer.status === null ? {} : { 'http.response.status_code': answer.status }),
              ...(outcome === 'success' ? {} : { 'error.type': outcome }),
            };
          },
        },
        () =>
          outbound.post(row.url, { ...headers }, body, {
            signal: this.abort.signal,
            // Checked again once the request has its connection: the wait for one may have used
            // up the lease, and no POST may outlast it.
            beforeSend: () => (this.leaseHolds() ? null : 'the lease would run out before its timeout'),
          }),
      );
      // Stopped mid-attempt: the answer, if any, is not trusted; the event is sent again later.
      if (this.stopped) break;
      const outcome = outcomeOf(result);
      metrics.attempts.inc({ outcome });
      if (outcome === 'not_sent') {
        // Not the receiver's failure: nothing is recorded against the endpoint, what was accepted
        // before is written, and the event is tried again shortly.
        this.dispatcher.notSent(row.id, result.error);
        if (!(await this.write())) return false;
        this.poked = true;
        const wait = NOT_SENT_RETRY_MS * (0.5 + Math.random());
        await pause(wait, undefined, { signal: this.abort.signal }).catch(() => {});
        return !this.stopped;
      }
      const done = this.progress(position);
      done.attempts.push({
        endpoint_id: row.id,
        webhook_id: webhookId,
        type,
        seq: change.seq,
        at: at.toISOString(),
        status: result.status,
        duration_ms: result.durationMs,
        error: result.error,
      });
      done.last = { status: result.status, at: at.toISOString() };
      if (outcome !== 'success') {
        // The attempt, the position before it and the retry's time in one write: nobody reads a
        // failed attempt with no retry scheduled.
        const failure = this.failure(row, result, at, recovered);
        if ('retry' in failure) done.retry = failure.retry;
        const held = await this.write();
        if (held && 'disable' in failure) await this.disable(row, failure.disable);
        return held && 'retry' in failure;
      }
      metrics.latency.observe(Math.max(0, (Date.now() - Date.parse(change.changed_at)) / 1000));
      position = change.seq;
      this.position = position;
      done.position = position;
      done.recovered = true;
      this.heard(done, floor, acknowledged, change);
      recovered = true;
      passed += 1;
      // The batch's last change is written just below, with the new floor if the batch was whole.
      if (passed < changes.length && Date.now() - flushedAt >= FLUSH_MS) {
        if (!(await this.write())) return false;
        flushedAt = Date.now();
      }
    }
    if (complete && passed === changes.length) this.progress(position).knownThrough = position;
    const held = await this.write();
    this.position = position;
    return held && !this.stopped;
  }

  /**
   * Writes what was done since the last write (the position, the attempts, the last status, what
   * the receiver now knows) in one transaction, so that a crash loses none of it relative to the
   * position; false when the lease is no longer this worker's. If the store fails it, the progress
   * stays for the next try.
   */
  private async write(): Promise<boolean> {
    const done = this.unwritten;
    if (done === null) return true;
    const { db } = this.dispatcher.options;
    const held = await db.transaction().execute(async (trx) => {
      const applied = await webhookRepository.updateLeased(trx, this.id, this.token, {
        position: done.position,
        ...(done.knownThrough === null ? {} : { known_through: done.knownThrough }),
        ...(done.last === null ? {} : { last_attempt_at: done.last.at, last_status: done.last.status }),
        ...(done.recovered ? { failing_since: null, failed_attempts: 0, next_attempt_at: null } : {}),
        ...(done.retry ?? {}),
        updated_at: new Date().toISOString(),
      });
      if (!applied) return false;
      await webhookRepository.recordAttempts(trx, done.attempts);
      if (done.knownThrough !== null) {
        // Every record acknowledged entered the view by the new floor: the floor covers them all,
        // so none is added, and nothing is deleted when nothing is held.
        if (this.acknowledgedEmpty !== true) await webhookRepository.forgetAcknowledged(trx, this.id);
      } else {
        await webhookRepository.forgetAcknowledged(trx, this.id, [...done.forgotten.values()]);
        await webhookRepository.acknowledge(trx, this.id, [...done.acknowledged.values()]);
      }
      return true;
    });
    this.unwritten = null;
    if (held && done.knownThrough !== null) this.acknowledgedEmpty = true;
    else if (held && done.acknowledged.size > 0) this.acknowledgedEmpty = false;
    return held;
  }

  /**
   * After a failed attempt: a 410 disables the endpoint at once, failing for longer than
   * WEBHOOK_DISABLE_AFTER_HOURS too (the reason is returned); otherwise the retry is scheduled.
   */
  private failure(
    row: LeasedEndpointRow,
    result: PostResult,
    at: Date,
    recovered: boolean,
  ): { disable: string } | { retry: NonNullable<Unwritten['retry']> } {
    const { disableAfterHours } = this.dispatcher.options;
    const failingSince = recovered || row.failing_since === null ? at.toISOString() : row.failing_since;
    const failures = recovered ? 1 : row.failed_attempts + 1;
    if (result.status === 410) return { disable: `the receiver answered 410 Gone (${at.toISOString()})` };
    if (at.getTime() - Date.parse(failingSince) >= disableAfterHours * 3_600_000)
      return { disable: `failing since ${failingSince} (last: ${result.error ?? 'no answer'})` };
    // From the attempt's end as the delivery log records it (`at` + `duration_ms`): counted from its
    // start, a timeout (10 s by default) would already have used up the first step (about 5 s), and
    // the retry would leave at once.
    const next = new Date(at.getTime() + result.durationMs + retryWaitMs(failures, result.retryAfterMs));
    return {
      retry: { failing_since: failingSince, failed_attempts: failures, next_attempt_at: next.toISOString() },
    };
  }

  private async disable(row: LeasedEndpointRow, reason: string): Promise<void> {
    const { db, logger } = this.dispatcher.options;
    const stamp = new Date().toISOString();
    await db.transaction().execute(async (trx) => {
      const held = await webhookRepository.updateLeased(trx, row.id, this.token, {
        state: 'disabled',
        disabled_reason: reason,
        lease_owner: null,
        lease_expires_at: null,
        updated_at: stamp,
      });
      if (!held) return;
      await auditRepository.insert(trx, {
        account_id: row.account_id,
        subject_type: 'webhook_endpoint',
        subject_id: row.id,
        actor: 'system',
        action: 'disabled',
        detail: reason,
        created_at: stamp,
      });
    });
    logger.warn({ endpoint: row.id, reason }, 'webhook endpoint disabled');
  }
}

/** Runs the deliveries of the endpoints this instance holds; `server.ts` starts and stops it. */
export class WebhookDispatcher {
  readonly instanceId = randomUUID();
  /** Claims made so far: each gets a token of its own (`EndpointWorker.token`). */
  private claims = 0;
  readonly metrics: DeliveryMetrics;
  /** Paces the deliveries while API requests saturate the event loop; told of them by `yieldTo`. */
  readonly governor = new DeliveryGovernor({ eventsPerSecondWhenBusy: EVENTS_PER_SECOND_WHEN_BUSY });
  private readonly workers = new Map<string, EndpointWorker>();
  private started = false;
  private stopping = false;
  private tickTimer: NodeJS.Timeout | null = null;
  private watchTimer: NodeJS.Timeout | null = null;
  private listener: pg.Client | null = null;
  private ticking: Promise<void> | null = null;
  private tickAgain = false;
  private lastGeneration = -1;
  /** How often the leases are renewed: a third of WEBHOOK_LEASE_SECONDS (at least 200 ms). */
  private renewEveryMs = 0;
  /** When the leases held were last renewed (Date.now()); 0 before the first tick. */
  private renewedAt = 0;
  /** When `notSent` last logged; never at first. */
  private notSentLoggedAt = Number.NEGATIVE_INFINITY;

  readonly options: DispatcherOptions;

  constructor(options: DispatcherOptions) {
    this.options = options;
    this.metrics = new DeliveryMetrics(() => this.workers.values());
  }

  /** Starts claiming endpoints and delivering; returns once the first claim was made. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.governor.start();
    this.renewEveryMs = Math.max(200, (this.options.leaseSeconds * 1000) / 3);
    this.tickTimer = setInterval(() => this.requestTick(), this.renewEveryMs);
    if (this.options.store === 'postgres') await this.listen();
    else if (this.options.commitWatch !== null) {
      const watch = this.options.commitWatch;
      this.watchTimer = setInterval(() => {
        // current() never rejects, and nothing in the callback throws.
        void watch.current().then((generation) => {
          if (generation === this.lastGeneration) return;
          this.lastGeneration = generation;
          this.wakeAll();
          this.requestTick();
        });
      }, COMMIT_WATCH_MS);
    }
    this.requestTick();
    await this.ticking;
    this.options.logger.info({ instance: this.instanceId }, 'webhook deliveries started');
  }

  /** Stops every worker (an attempt in flight is abandoned, and sent again later) and gives up the leases. */
  async stop(): Promise<void> {
    if (!this.started || this.stopping) return;
    this.stopping = true;
    this.governor.stop();
    if (this.tickTimer !== null) clearInterval(this.tickTimer);
    if (this.watchTimer !== null) clearInterval(this.watchTimer);
    await this.ticking;
    const workers = [...this.workers.values()];
    for (const worker of workers) worker.stop();
    await Promise.all(workers.map((worker) => worker.done));
    await webhookRepository.release(this.options.db, this.instanceId).catch(() => {});
    const listener = this.listener;
    this.listener = null;
    // A frozen server never answers the goodbye: the connection is not waited for past a second.
    if (listener !== null) {
      await Promise.race([listener.end().catch(() => {}), sleep(LISTEN_END_MS)]);
    }
  }

  /** Number of endpoints this instance delivers for. */
  get held(): number {
    return this.workers.size;
  }

  /** An event left unsent (`not_sent`): told in the log, at most once per NOT_SENT_LOG_MS. */
  notSent(endpoint: string, reason: string | null): void {
    const now = Date.now();
    if (now - this.notSentLoggedAt < NOT_SENT_LOG_MS && now >= this.notSentLoggedAt) return;
    this.notSentLoggedAt = now;
    this.options.logger.warn(
      { endpoint, reason },
      'webhook event not sent, through no fault of the receiver: it is tried again shortly',
    );
  }

  forget(worker: EndpointWorker): void {
    if (this.workers.get(worker.id) === worker) this.workers.delete(worker.id);
  }

  private wakeAll(): void {
    for (const worker of this.workers.values()) worker.wake();
  }

  /** A notification: `*` (endpoints changed: claim) or an account whose data changed. */
  private heard(payload: string): void {
    if (payload === '*') {
      this.requestTick();
      return;
    }
    for (const worker of this.workers.values()) if (worker.accountId === payload) worker.wake();
  }

  /** Runs a tick now, or once more after the one running. */
  private requestTick(): void {
    if (this.stopping) return;
    if (this.ticking !== null) {
      this.tickAgain = true;
      return;
    }
    this.ticking = this.tick()
      .catch((error: unknown) => {
        if (!isStoreUnavailable(error))
          this.options.logger.error({ err: error }, 'webhook lease renewal failed');
      })
      .finally(() => {
        this.ticking = null;
        if (this.tickAgain) {
          this.tickAgain = false;
          this.requestTick();
        }
      });
  }

  /**
   * Renews the leases held when a renewal is due, drops the workers of those lost, claims free
   * endpoints and starts their workers.
   *
   * Ticks come from the timer (every third of the lease) and from every commit the instance hears
   * of (a new endpoint may be free to claim). Only a due tick writes: on SQLite the commit watch
   * sees the instance's own renewal as a commit, and a tick that renewed at each commit would
   * write ten times a second for ever, idle or not.
   */
  private async tick(): Promise<void> {
    const { db, leaseSeconds, store, commitWatch } = this.options;
    const now = Date.now();
    const until = now + leaseSeconds * 1000;
    const untilIso = new Date(until).toISOString();
    // Half the period: the timer's own ticks are always due, whatever their jitter.
    if (now - this.renewedAt >= this.renewEveryMs / 2) {
      this.renewedAt = now;
      const workers = [...this.workers.values()];
      const held = new Set(
        await webhookRepository.renewLeases(
          db,
          workers.map((worker) => ({ id: worker.id, owner: worker.token })),
          untilIso,
        ),
      );
      for (const worker of workers) {
        if (held.has(worker.id)) worker.leaseUntil = until;
        else worker.stop();
      }
    }
    if (this.stopping) return;
    const nowIso = new Date(now).toISOString();
    if (await webhookRepository.anyClaimable(db, nowIso)) {
      const token = `${this.instanceId}/${(this.claims += 1)}`;
      const claimed = await webhookRepository.claim(db, token, nowIso, untilIso, CLAIM_LIMIT);
      for (const id of claimed) {
        const row = await webhookRepository.findLeased(db, id, token);
        if (row === undefined) continue;
        // A worker still here lost its lease (released, or run out) and has not noticed yet: its
        // writes no longer apply, and the new claim gets a worker of its own.
        this.workers.get(id)?.stop();
        this.workers.set(id, new EndpointWorker(id, row.account_id, token, until, this));
      }
    }
    // Without a signal of commits (an in-memory database), every tick is one.
    if (store === 'sqlite' && commitWatch === null) this.wakeAll();
  }

  /** PostgreSQL: a connection of its own that LISTENs for the writers' NOTIFY, reconnected when lost. */
  private async listen(): Promise<void> {
    if (this.stopping) return;
    const client = new pg.Client({ connectionString: this.options.databaseUrl, keepAlive: true });
    const retry = () => {
      if (this.listener !== client || this.stopping) return;
      this.listener = null;
      client.end().catch(() => {});
      // listen() never rejects: a failure schedules the next try.
      setTimeout(() => void this.listen(), LISTEN_RETRY_MS).unref();
    };
    client.on('error', retry);
    client.on('end', retry);
    client.on('notification', (message) => this.heard(message.payload ?? '*'));
    this.listener = client;
    try {
      await client.connect();
      await client.query(`LISTEN ${WEBHOOK_CHANNEL}`);
      // Anything committed while not listening is looked for now.
      this.wakeAll();
      this.requestTick();
    } catch {
      retry();
    }
  }
}
