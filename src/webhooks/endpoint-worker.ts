import { performance } from 'node:perf_hooks';
import { setTimeout as pause } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import type { LeasedEndpointRow } from '../db/repositories/webhooks.ts';
import type { Database } from '../db/schema.ts';
import { isStoreUnavailable } from '../db/store-health.ts';
import { attempt } from './attempt.ts';
import type { DeliveryMetrics, EndpointStanding } from './delivery-metrics.ts';
import { matchesFilter } from './events.ts';
import { type Batch, type DeliveryFeed, fetchBatch, knows, type StoredAcknowledged } from './fetch-batch.ts';
import type { DeliveryGovernor } from './governor.ts';
import { destinationHost, type HostRate } from './host-rate.ts';
import { checkBeforeSend, leaseCovers, leasedEndpoint, type SendCheck } from './lease.ts';
import type { OutboundClient } from './outbound.ts';
import { eventType } from './payload.ts';
import { planCheck } from './plan-check.ts';
import {
  disableEndpoint,
  newProgress,
  type Progress,
  passed,
  recordOutcome,
  storedAfter,
  writeProgress,
} from './record-outcome.ts';
import { signingKeys } from './signing.ts';

/** Changes read per batch. */
const BATCH = 200;
/** The position of a busy endpoint is written at least this often. */
const FLUSH_MS = 250;
/** The pause before a worker tries again after the store failed it, on average. */
const STORE_RETRY_MS = 1000;
/** Before an event that was not sent (`not_sent`) is tried again, on average. */
const NOT_SENT_RETRY_MS = 1000;
/**
 * At most this much later than its host's window has room, an event held back by the host's rate
 * is tried again: the endpoints waiting on one host do not all come back at the same moment.
 */
const HOST_RATE_JITTER_MS = 100;

/** The secrets that sign an endpoint's events now (`WebhookService`, handed in by the composition root). */
export interface EndpointSecrets {
  signingSecrets(row: LeasedEndpointRow, now: Date): Promise<string[]>;
}

/**
 * Who is told when an endpoint has failed for an hour or was disabled by its deliveries
 * (`MailService`, handed in by the composition root). Neither call waits for the telling.
 */
export interface EndpointNotices {
  endpointFailing(endpoint: LeasedEndpointRow, failingSince: string, at: Date): void;
  endpointDisabled(endpoint: LeasedEndpointRow, reason: string, stamp: string): void;
}

export interface WorkerOptions {
  db: Kysely<Database>;
  feed: DeliveryFeed;
  secrets: EndpointSecrets;
  outbound: OutboundClient;
  leaseSeconds: number;
  timeoutMs: number;
  disableAfterHours: number;
  /** Changes read per batch: BATCH, unless a test needs reads cut short sooner. */
  batchSize?: number;
  /**
   * The instance's wall clock (ms since the epoch): `Date.now` unless a test skews it. It times the
   * retries; leases never read it (they run on the database's clock).
   */
  clock?: () => number;
  /** Who is told of an endpoint failing for an hour or disabled (the mail service); none without SMTP_URL. */
  notices?: EndpointNotices | null;
  /** The rate per destination host (WEBHOOK_HOST_RATE, ./host-rate.ts); none: no bound. */
  hostRate?: HostRate | null;
  logger: {
    info(details: object, message: string): void;
    warn(details: object, message: string): void;
    error(details: object, message: string): void;
  };
}

/** What a worker has of the dispatcher that runs it. */
export interface WorkerHost {
  readonly options: WorkerOptions;
  readonly metrics: DeliveryMetrics;
  /** Paces the deliveries of the whole instance while API requests saturate the event loop. */
  readonly governor: DeliveryGovernor;
  /** An event left unsent (`not_sent`), for the log. */
  notSent(endpoint: string, reason: string | null): void;
  /** The lease of a worker has too little time left on the database's clock: renew now. */
  renewSoon(): void;
  /** The worker ended. */
  forget(worker: EndpointWorker): void;
}

/** What a worker knows of its endpoint between steps: its one state. */
interface EndpointState {
  /**
   * Until when this instance's lease on the endpoint holds at least, as last claimed, renewed or
   * checked (on `performance.now()`'s clock, from the time the database gave the lease).
   */
  leaseUntil: number;
  /** The endpoint's position and its account's feed head, as last seen (the lag). */
  position: number;
  /**
   * The position as the store holds it, as this worker last read or wrote it: the check before a
   * POST finds it unchanged unless someone else moved it (a skip, a resend).
   */
  storedPosition: number;
  head: number;
  /** When the first change after the position was made, while it waits; null when caught up. */
  waitingSince: number | null;
  /** Whether the account's data may have changed since the feed was last read. */
  readDue: boolean;
  /**
   * What was done since the position was last written: kept by the worker, not by one batch, so
   * that after a write the store failed (an outage, a full pool) the next step writes it first
   * instead of sending those events again.
   */
  unwritten: Progress | null;
  /**
   * What the endpoint's `webhook_acknowledged` holds: unknown until this worker's first floor
   * write; then a batch looks nothing up and a floor write deletes nothing while it is empty.
   */
  stored: StoredAcknowledged;
}

/**
 * The delivery loop of one endpoint, while this instance holds its lease. Each turn of the loop
 * takes the steps of a delivery in order: the lease (`lease.ts`), the plan check
 * (`plan-check.ts`), the fetch of a batch (`fetch-batch.ts`), then for each change an attempt
 * (`attempt.ts`) and the record of its outcome (`record-outcome.ts`).
 */
export class EndpointWorker implements EndpointStanding {
  readonly id: string;
  readonly accountId: string;
  /**
   * The claim this worker delivers under (`INSTANCE/N`, the endpoint's `lease_owner`): every
   * write of the worker applies only while the endpoint is held under it, so a worker whose lease
   * was released (resend, disable) cannot write over the endpoint once it is claimed again, even
   * by the same instance.
   */
  readonly token: string;
  readonly done: Promise<void>;
  private readonly host: WorkerHost;
  private readonly state: EndpointState;
  private readonly sleeper = new Sleeper();
  /** Aborted when the worker stops: ends an attempt or a pause in flight. */
  private readonly abort = new AbortController();

  constructor(
    row: Pick<LeasedEndpointRow, 'id' | 'account_id'>,
    token: string,
    leaseUntil: number,
    host: WorkerHost,
  ) {
    this.id = row.id;
    this.accountId = row.account_id;
    this.token = token;
    this.host = host;
    this.state = {
      leaseUntil,
      position: 0,
      storedPosition: 0,
      head: 0,
      waitingSince: null,
      readDue: true,
      unwritten: null,
      stored: 'unknown',
    };
    this.done = this.loop().catch((error: unknown) => {
      if (!isStoreUnavailable(error))
        host.options.logger.error({ err: error, endpoint: this.id }, 'webhook delivery loop failed');
      host.forget(this);
    });
  }

  lag(): number {
    return Math.max(0, this.state.head - this.state.position);
  }

  oldestUndeliveredSeconds(): number {
    const { waitingSince } = this.state;
    return waitingSince === null || this.lag() === 0 ? 0 : (Date.now() - waitingSince) / 1000;
  }

  /** The lease was renewed: it holds at least until `until` (`performance.now()`). */
  renewed(until: number): void {
    this.state.leaseUntil = Math.max(this.state.leaseUntil, until);
  }

  /** The account's data may have changed: read the feed again. */
  wake(): void {
    this.state.readDue = true;
    this.sleeper.wake();
  }

  stop(): void {
    this.abort.abort();
    this.sleeper.wake();
  }

  private get stopped(): boolean {
    return this.abort.signal.aborted;
  }

  /** Whether a POST started now ends, timeout included, before the lease could run out. */
  private leaseCovers(): boolean {
    return leaseCovers(this.state.leaseUntil, this.host.options.timeoutMs);
  }

  /** The instance's clock. */
  private now(): number {
    return (this.host.options.clock ?? Date.now)();
  }

  /** What was done since the last write, begun (if nothing was) at `position`, where that write left it. */
  private progress(position: number): Progress {
    return (this.state.unwritten ??= newProgress(position));
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
        this.state.readDue = true;
        // Jittered: workers the store failed together (a full pool) do not come back together.
        await this.pause(STORE_RETRY_MS);
      }
    }
    this.host.forget(this);
  }

  /** One read of the endpoint and, if there is something to send, one batch; false when the loop must end. */
  private async step(): Promise<boolean> {
    const { db, timeoutMs, leaseSeconds } = this.host.options;
    const row = await leasedEndpoint(db, this);
    if (row === null) return false;
    // Events delivered before a write the store failed: their position goes first, and they are
    // not sent again (the lease, still this worker's, shows nobody else wrote meanwhile).
    if (this.state.unwritten !== null) return this.write();
    this.state.position = row.position;
    this.state.storedPosition = row.position;
    this.state.head = row.head;
    const { readDue } = this.state;
    // The plan check takes the lease's end on the instance's clock, as the retry times are.
    const now = this.now();
    const leaseUntil = now + (this.state.leaseUntil - performance.now());
    const check = planCheck({ row, readDue, leaseUntil, timeoutMs, leaseSeconds, now });
    if (check.next === 'wait') {
      await this.sleeper.sleep(check.ms);
      return true;
    }
    if (check.next === 'disable') {
      await this.disable(row, check.reason);
      return false;
    }
    this.state.readDue = false;
    const batch = await fetchBatch(
      db,
      this.host.options.feed,
      row,
      this.host.options.batchSize ?? BATCH,
      this.state.stored,
    );
    this.state.head = batch.head;
    if (batch.changes.length === 0) return this.caughtUp(row.position, batch.head);
    this.state.waitingSince = Date.parse(batch.changes[0]?.changed_at ?? '') || Date.now();
    if (batch.more) this.state.readDue = true;
    return this.deliver(row, batch);
  }

  /**
   * Seqs with no change left (a change to the account itself, records that changed again): nothing
   * to send up to the head, so the position moves there and the lag reads 0. No record's latest
   * change lies after the position, so each was sent (or known) since it entered the view: the
   * floor moves there too.
   */
  private async caughtUp(position: number, head: number): Promise<boolean> {
    this.state.waitingSince = null;
    if (head <= position) return true;
    const done = this.progress(position);
    done.position = head;
    done.knownThrough = head;
    if (!(await this.write())) return false;
    this.state.position = head;
    return true;
  }

  /**
   * Delivers the batch's changes in order until one fails; false when the loop must end (lease
   * lost, disabled, stopped). The floor moves up to the position when a complete read was
   * delivered whole: each record that entered the view by then was sent at a seq at or after its
   * entry, in that read or before it.
   */
  private async deliver(row: LeasedEndpointRow, { changes, complete, known }: Batch): Promise<boolean> {
    const { feed, secrets, outbound, disableAfterHours, timeoutMs } = this.host.options;
    const destination = destinationHost(row.url);
    const { metrics } = this.host;
    const filter = JSON.parse(row.events) as string[];
    const keys = signingKeys(await secrets.signingSecrets(row, new Date()));
    const cursors = await feed.cursors();
    let position = row.position;
    let flushedAt = Date.now();
    // Whether an event of this batch was accepted: the endpoint's failure, if any, is over.
    let recovered = false;
    // Changes of this batch accepted or left out by the filter (a prefix of it, in feed order).
    let heard = 0;

    for (const change of changes) {
      if (this.stopped || !this.leaseCovers()) break;
      const type = eventType(change, knows(known, change));
      if (!matchesFilter(filter, type)) {
        // Left out by the endpoint's choice: it counts as heard, as an accepted event does.
        passed(this.progress(position), known, change);
        position = change.seq;
        heard += 1;
        continue;
      }
      const check = await this.clearToSend(row.id, destination);
      if (check === null) break;
      if (!check.send) {
        // Lost: what was done since the last write is not written (another holds the endpoint, or
        // its position was set by hand), and those events are sent again by whoever delivers next.
        if (check.lost) return false;
        metrics.attempts.inc({ outcome: 'not_sent' });
        this.host.renewSoon();
        return this.notSent(row.id, check.reason);
      }
      const leaseUntil = check.until;
      const made = await attempt({
        endpoint: row,
        change,
        type,
        keys,
        cursors,
        outbound,
        signal: this.abort.signal,
        // Checked again once the request has its connection: the wait for one may have used up
        // the lease (as the database gave it just before), and no POST may outlast it.
        beforeSend: () =>
          leaseCovers(leaseUntil, timeoutMs) ? null : 'the lease would run out before its timeout',
      });
      // Stopped mid-attempt: the answer, if any, is not trusted; the event is sent again later.
      if (this.stopped) break;
      metrics.attempts.inc({ outcome: made.outcome });
      if (made.outcome === 'not_sent') return this.notSent(row.id, made.result.error);
      const verdict = recordOutcome(this.progress(position), change, made, {
        row,
        known,
        recovered,
        disableAfterHours,
      });
      if (verdict.next !== 'continue') {
        // The attempt, the position before it and the retry's time in one write: nobody reads a
        // failed attempt with no retry scheduled.
        const held = await this.write();
        if (held && verdict.next === 'disable') await this.disable(row, verdict.reason);
        if (held && verdict.next === 'retry')
          this.host.options.notices?.endpointFailing(row, verdict.failingSince, made.at);
        return held && verdict.next === 'retry';
      }
      metrics.latency.observe(Math.max(0, (Date.now() - Date.parse(change.changed_at)) / 1000));
      position = change.seq;
      this.state.position = position;
      recovered = true;
      heard += 1;
      // The batch's last change is written just below, with the new floor if the batch was whole.
      if (heard < changes.length && Date.now() - flushedAt >= FLUSH_MS) {
        if (!(await this.write())) return false;
        flushedAt = Date.now();
      }
    }
    if (complete && heard === changes.length) this.progress(position).knownThrough = position;
    const held = await this.write();
    this.state.position = position;
    return held && !this.stopped;
  }

  /**
   * What comes before each POST: the instance's pace (the governor), the check on the database
   * (still this worker's: not disabled, deleted, skipped past or taken through any instance
   * meanwhile, with time left for the timeout on the database's clock), then the destination
   * host's rate, shared by the instances. Over the rate, the event waits here for the host's next
   * window (not held against the receiver, `not_sent` in the metrics) and is checked again. The
   * check that lets it go, or says why not; null when the worker stopped meanwhile.
   */
  private async clearToSend(endpointId: string, destination: string): Promise<SendCheck | null> {
    const { db, timeoutMs, hostRate } = this.host.options;
    const { metrics, governor } = this.host;
    for (;;) {
      await governor.turn(this.abort.signal);
      if (this.stopped) return null;
      const check = await checkBeforeSend(db, this, this.state.storedPosition, timeoutMs);
      if (this.stopped) return null;
      if (!check.send) return check;
      this.state.leaseUntil = Math.max(this.state.leaseUntil, check.until);
      const wait = (await hostRate?.take(destination)) ?? null;
      if (this.stopped) return null;
      if (wait === null) return check;
      metrics.attempts.inc({ outcome: 'not_sent' });
      this.host.notSent(endpointId, "the destination host's rate (WEBHOOK_HOST_RATE) is used up");
      await pause(wait + Math.random() * HOST_RATE_JITTER_MS, undefined, { signal: this.abort.signal }).catch(
        () => {},
      );
      if (this.stopped) return null;
    }
  }

  /**
   * An event that did not leave, through no fault of the receiver: nothing is recorded against the
   * endpoint, what was accepted before is written, and the event is tried again shortly.
   */
  private async notSent(endpointId: string, reason: string | null): Promise<boolean> {
    this.host.notSent(endpointId, reason);
    if (!(await this.write())) return false;
    this.state.readDue = true;
    await this.pause(NOT_SENT_RETRY_MS);
    return !this.stopped;
  }

  /**
   * Writes what was done since the last write; false when the lease is no longer this worker's.
   * If the store fails it, the progress stays for the next try.
   */
  private async write(): Promise<boolean> {
    const done = this.state.unwritten;
    if (done === null) return true;
    const held = await writeProgress(this.host.options.db, this.id, this.token, done, this.state.stored);
    this.state.unwritten = null;
    if (held) {
      this.state.stored = storedAfter(done, this.state.stored);
      this.state.storedPosition = done.position;
    }
    return held;
  }

  private async disable(row: LeasedEndpointRow, reason: string): Promise<void> {
    const stamp = await disableEndpoint(this.host.options.db, row, this.token, reason);
    if (stamp === null) return;
    this.host.options.logger.warn({ endpoint: row.id, reason }, 'webhook endpoint disabled');
    this.host.options.notices?.endpointDisabled(row, reason, stamp);
  }

  /** About `averageMs` (jittered by half either way), or until the worker stops. */
  private async pause(averageMs: number): Promise<void> {
    await pause(averageMs * (0.5 + Math.random()), undefined, { signal: this.abort.signal }).catch(() => {});
  }
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
