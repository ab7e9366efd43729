import { performance } from 'node:perf_hooks';
import { setTimeout as pause } from 'node:timers/promises';

/**
 * Deliveries give way to the API. A server instance runs its HTTP requests and its webhook
 * deliveries on one event loop, which gives every ready callback its turn: a worker that posts
 * events as fast as a receiver answers takes a share of a saturated loop from the requests (about
 * 12% of page-1 throughput at 280 events a second, in the bench). So while the loop is saturated
 * (busy at least BUSY_UTILIZATION of the last SAMPLE_MS) and API responses are being sent, the
 * deliveries of the whole instance are paced to at most `eventsPerSecondWhenBusy`; the rest of the
 * time, and when the loop is busy with deliveries alone, they run at full speed.
 */

/** The share of the last sample the event loop spent running callbacks, above which it is saturated. */
const BUSY_UTILIZATION = 0.9;
/** How often the loop's utilization is read. */
const SAMPLE_MS = 100;

export interface GovernorOptions {
  eventsPerSecondWhenBusy: number;
  /** The loop's utilization since the last call (0 to 1); tests give their own. */
  utilization?: () => number;
}

export class DeliveryGovernor {
  private readonly utilization: () => number;
  private readonly intervalMs: number;
  private timer: NodeJS.Timeout | null = null;
  /** The count of API responses the server has sent, as `yieldTo` was told; 0 until then. */
  private responses: () => number = () => 0;
  private responsesSeen = 0;
  private yielding = false;
  /** When the next paced event may leave (performance.now()). */
  private nextSlot = 0;

  constructor(options: GovernorOptions) {
    this.intervalMs = 1000 / options.eventsPerSecondWhenBusy;
    this.utilization = options.utilization ?? loopUtilization();
  }

  /** `responses`: the API responses sent so far, a count that grows with the work deliveries give way to. */
  yieldTo(responses: () => number): void {
    this.responses = responses;
  }

  start(): void {
    this.timer ??= setInterval(() => this.sample(), SAMPLE_MS).unref();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.yielding = false;
  }

  /** Whether deliveries are paced now. */
  get isYielding(): boolean {
    return this.yielding;
  }

  /** Reads the loop's utilization and the responses sent since the last sample. */
  sample(): void {
    const responses = this.responses();
    this.yielding = this.utilization() >= BUSY_UTILIZATION && responses > this.responsesSeen;
    this.responsesSeen = responses;
    if (!this.yielding) this.nextSlot = 0;
  }

  /** Resolves when the next event may be sent: at once, unless deliveries give way (or `signal` ends the wait). */
  async turn(signal: AbortSignal): Promise<void> {
    if (!this.yielding) return;
    const now = performance.now();
    const slot = Math.max(this.nextSlot, now);
    this.nextSlot = slot + this.intervalMs;
    if (slot > now) await pause(slot - now, undefined, { signal }).catch(() => {});
  }
}

/** The event loop's utilization between one call and the next. */
function loopUtilization(): () => number {
  let last = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const { utilization } = performance.eventLoopUtilization(now, last);
    last = now;
    return utilization;
  };
}
