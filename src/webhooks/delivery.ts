import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { webhookRepository } from '../db/repositories/webhooks.ts';
import { isStoreUnavailable } from '../db/store-health.ts';
import { type CommitSignal, type CommitSignalOptions, commitSignal } from './commit-signal.ts';
import { DeliveryMetrics } from './delivery-metrics.ts';
import { EndpointWorker, type WorkerOptions } from './endpoint-worker.ts';
import { DeliveryGovernor } from './governor.ts';
import { anyFree, claim, releaseAll, renewalPeriodMs, renewLeases } from './lease.ts';

/**
 * The delivery of webhooks (docs/design.md, "Webhooks"; docs/webhooks.md): each server instance runs a
 * `WebhookDispatcher`, which holds leases on endpoints and runs one `EndpointWorker` per endpoint
 * it holds. A worker's step is the steps of a delivery, each a module of its own:
 *
 * 1. the lease (`lease.ts`): the endpoint is read under the worker's claim, or the worker ends;
 * 2. the plan check (`plan-check.ts`): read the feed now, wait (no API access, a retry not yet due,
 *    nothing new, a lease too short for a POST), or disable (past the feed's retention);
 * 3. the fetch of a batch (`fetch-batch.ts`): the changes after the position, and what the receiver
 *    knows of their records;
 * 4. an attempt per change (`attempt.ts`): the event signed and POSTed;
 * 5. the record of its outcome (`record-outcome.ts`): the position, the attempt, the retry or the
 *    disabling, written in one transaction.
 *
 * - One instance per endpoint: an endpoint is delivered for by the instance holding its lease
 *   (`lease_owner`, `lease_expires_at`, set and compared on the database's clock). The holder
 *   renews its leases every third of WEBHOOK_LEASE_SECONDS; an instance that dies stops renewing,
 *   and another one takes its endpoints once the lease has run out. Every write of the loop is
 *   conditional on the lease, and before each POST the worker reads its endpoint again (held, active,
 *   unmoved, with time left for the timeout), so an instance that lost it sends nothing more, and
 *   none starts a POST that could outlast it.
 * - At most WEBHOOK_HOST_RATE POSTs a second go to one destination host (`host-rate.ts`), counted in
 *   Redis by all the instances when there is one.
 * - In order, at least once: the worker reads the changes after the endpoint's position, in feed
 *   order, and POSTs them one at a time. The position moves only after a 2xx (or past an event the
 *   filter leaves out), and is written at least every 250 ms and at the end of each batch: a
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
 *   RETRY_SCHEDULE_S (`retry.ts`) with jitter, counted from the end of the failed attempt; a 410
 *   disables the endpoint at once, and so does failing for WEBHOOK_DISABLE_AFTER_HOURS, with the
 *   reason recorded and an audit event.
 * - No polling when idle: a worker sleeps until woken by the commit signal (`commit-signal.ts`).
 */

/** The deliveries of one instance, in all, while its event loop is saturated by API requests (./governor.ts). */
const EVENTS_PER_SECOND_WHEN_BUSY = 100;
/** At most one warning per this period says that events wait for a free connection. */
const NOT_SENT_LOG_MS = 60_000;
/**
 * How often an instance deletes the delivery log's attempts older than it keeps, from the logs of
 * every endpoint (a write trims its own endpoint's log; this reaches those written to no more).
 */
const LOG_PURGE_MS = 3_600_000;
/** The first purge after the start: not in the way of the first claims. */
const FIRST_LOG_PURGE_MS = 60_000;

export interface DispatcherOptions extends WorkerOptions, CommitSignalOptions {}

/** Runs the deliveries of the endpoints this instance holds; `server.ts` starts and stops it. */
export class WebhookDispatcher {
  readonly instanceId = randomUUID();
  /** Claims made so far: each gets a token of its own (`EndpointWorker.token`). */
  private claims = 0;
  readonly metrics: DeliveryMetrics;
  /** Paces the deliveries while API requests saturate the event loop; told of them by `yieldTo`. */
  readonly governor = new DeliveryGovernor({ eventsPerSecondWhenBusy: EVENTS_PER_SECOND_WHEN_BUSY });
  private readonly workers = new Map<string, EndpointWorker>();
  private readonly signal: CommitSignal;
  private phase: 'new' | 'running' | 'stopping' = 'new';
  private tickTimer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  private tickAgain = false;
  /** How often the leases are renewed: a third of WEBHOOK_LEASE_SECONDS (at least 200 ms). */
  private readonly renewEveryMs: number;
  /** When the leases held were last renewed (performance.now()); never before the first tick. */
  private renewedAt = Number.NEGATIVE_INFINITY;
  /** When `notSent` last logged; never at first. */
  private notSentLoggedAt = Number.NEGATIVE_INFINITY;
  /** When the delivery log's old attempts are next purged (performance.now()), and the purge under way. */
  private logPurgeDue = performance.now() + FIRST_LOG_PURGE_MS;
  private purging: Promise<void> | null = null;

  readonly options: DispatcherOptions;

  constructor(options: DispatcherOptions) {
    this.options = options;
    this.metrics = new DeliveryMetrics(() => this.workers.values());
    this.renewEveryMs = renewalPeriodMs(options.leaseSeconds);
    this.signal = commitSignal(options, {
      anything: () => {
        this.wake(() => true);
        this.requestTick();
      },
      endpoints: () => this.requestTick(),
      account: (accountId) => this.wake((worker) => worker.accountId === accountId),
    });
  }

  /** Starts claiming endpoints and delivering; returns once the first claim was made. */
  async start(): Promise<void> {
    if (this.phase !== 'new') return;
    this.phase = 'running';
    this.governor.start();
    this.tickTimer = setInterval(() => this.requestTick(), this.renewEveryMs);
    await this.signal.start();
    this.requestTick();
    await this.ticking;
    this.options.logger.info({ instance: this.instanceId }, 'webhook deliveries started');
  }

  /** Stops every worker (an attempt in flight is abandoned, and sent again later) and gives up the leases. */
  async stop(): Promise<void> {
    if (this.phase !== 'running') return;
    this.phase = 'stopping';
    this.governor.stop();
    if (this.tickTimer !== null) clearInterval(this.tickTimer);
    const signalStopped = this.signal.stop();
    await this.ticking;
    await this.purging;
    const workers = [...this.workers.values()];
    for (const worker of workers) worker.stop();
    await Promise.all(workers.map((worker) => worker.done));
    await releaseAll(this.options.db, this.instanceId).catch(() => {});
    await signalStopped;
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

  /**
   * A worker found its lease, on the database's clock, too short for a POST (the renewals came
   * late: a stalled event loop, a slow store): the leases are renewed at once rather than at the
   * next period.
   */
  renewSoon(): void {
    this.renewedAt = Number.NEGATIVE_INFINITY;
    this.requestTick();
  }

  forget(worker: EndpointWorker): void {
    if (this.workers.get(worker.id) === worker) this.workers.delete(worker.id);
  }

  private wake(which: (worker: EndpointWorker) => boolean): void {
    for (const worker of this.workers.values()) if (which(worker)) worker.wake();
  }

  /** Runs a tick now, or once more after the one running. */
  private requestTick(): void {
    if (this.phase === 'stopping') return;
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
    const { db, leaseSeconds } = this.options;
    const leaseMs = leaseSeconds * 1000;
    // The database sets each lease to run out `leaseMs` after its statement, which runs after this:
    // on the instance's monotonic clock the lease is known to hold at least until `until`.
    const now = performance.now();
    const until = now + leaseMs;
    // Half the period: the timer's own ticks are always due, whatever their jitter.
    if (now - this.renewedAt >= this.renewEveryMs / 2) {
      this.renewedAt = now;
      const workers = [...this.workers.values()];
      const held = await renewLeases(db, workers, leaseMs);
      for (const worker of workers) {
        if (held.has(worker.id)) worker.renewed(until);
        else worker.stop();
      }
    }
    if (this.phase === 'stopping') return;
    if (await anyFree(db)) {
      const token = `${this.instanceId}/${(this.claims += 1)}`;
      const claimedFrom = performance.now();
      for await (const row of claim(db, token, leaseMs)) {
        // A worker still here lost its lease (released, or run out) and has not noticed yet: its
        // writes no longer apply, and the new claim gets a worker of its own.
        this.workers.get(row.id)?.stop();
        this.workers.set(row.id, new EndpointWorker(row, token, claimedFrom + leaseMs, this));
      }
    }
    if (this.signal.everyTick) this.wake(() => true);
    if (now >= this.logPurgeDue && this.purging === null) {
      this.logPurgeDue = now + LOG_PURGE_MS;
      this.purging = this.purgeLog().finally(() => {
        this.purging = null;
      });
    }
  }

  /** Deletes the delivery log's attempts older than it keeps; on its own, beside the ticks. */
  private async purgeLog(): Promise<void> {
    try {
      await webhookRepository.purgeOldAttempts(this.options.db);
    } catch (error) {
      if (!isStoreUnavailable(error))
        this.options.logger.error({ err: error }, 'could not delete old webhook delivery attempts');
    }
  }
}
