import type { Redis } from 'ioredis';
import {
  type RateLimiterAbstract,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
} from 'rate-limiter-flexible';
import type { RedisSuspicion } from '../redis.ts';

/**
 * The rate per destination host (WEBHOOK_HOST_RATE): at most `perSecond` POSTs a second to one
 * host, whatever the endpoints, accounts and instances they come from. A tenant may aim many
 * endpoints at one third party's host; the third party gets at most this rate from the service.
 *
 * Counted in a fixed window of one second per host (rate-limiter-flexible), shared by every
 * instance through Redis when REDIS_URL is set. While Redis fails (or before it answers), each
 * instance counts in its own memory, so that deliveries go on: the host may then get the rate once
 * per instance. Without Redis (one instance on SQLite), in process memory.
 *
 * An event over the rate is not sent and not held against the receiver (`not_sent`): it is tried
 * again once the host's window has room.
 */

/** One second: the window the rate is counted in. */
const WINDOW_SECONDS = 1;
const KEY_PREFIX = 'safety-api:webhook-host';

/** The host rate as the delivery loop asks it. */
export interface HostRate {
  /** Takes one POST to `host`: null when it may go now, or the milliseconds until the host's window has room. */
  take(host: string): Promise<number | null>;
}

export class HostRateLimiter implements HostRate {
  /** The count in Redis (with this instance's own as insurance), or this instance's own alone. */
  private readonly shared: RateLimiterAbstract;
  private readonly own: RateLimiterMemory;
  private readonly suspicion: RedisSuspicion | null;

  /**
   * `suspicion`: the process's view of Redis (`RedisSuspicion`): while a command was late, the
   * instance counts on its own at once rather than wait for Redis's deadline before each POST.
   */
  constructor(perSecond: number, redis: Redis | null, suspicion: RedisSuspicion | null = null) {
    const options = { points: perSecond, duration: WINDOW_SECONDS };
    const own = new RateLimiterMemory({ ...options, keyPrefix: KEY_PREFIX });
    this.own = own;
    this.suspicion = suspicion;
    this.shared =
      redis === null
        ? own
        : new RateLimiterRedis({
            ...options,
            storeClient: redis,
            keyPrefix: KEY_PREFIX,
            // Disconnected: straight to this instance's own count, without trying the command first.
            rejectIfRedisNotReady: true,
            insuranceLimiter: own,
          });
  }

  async take(host: string): Promise<number | null> {
    try {
      const limiter = this.suspicion?.suspect === true ? this.own : this.shared;
      await limiter.consume(host.toLowerCase());
      return null;
    } catch (refused) {
      if (refused instanceof RateLimiterRes) return Math.max(1, refused.msBeforeNext);
      // Neither Redis nor the insurance could count (they do not fail otherwise): deliveries go on.
      return null;
    }
  }
}

/** The host of `url` as the rate counts it: its name (or address), without the port. */
export function destinationHost(url: string): string {
  return new URL(url).hostname.toLowerCase();
}
