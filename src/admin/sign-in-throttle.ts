import type { Redis } from 'ioredis';
import { type RateLimiterAbstract, RateLimiterMemory, RateLimiterRedis } from 'rate-limiter-flexible';

/**
 * Slows password guessing: failed sign-ins are counted per account email and per client address.
 * With Redis the counts are shared by every instance; without it each instance counts alone.
 */

const WINDOW_SECONDS = 15 * 60;
const FAILURES_PER_EMAIL = 5;
const FAILURES_PER_ADDRESS = 20;

interface Counter {
  limiter: RateLimiterAbstract;
  points: number;
}

export class SignInThrottle {
  private constructor(
    private readonly byEmail: Counter,
    private readonly byAddress: Counter,
  ) {}

  /** `redis` is the process's shared connection (see src/redis.ts), or `null` to count in memory. */
  static create(redis: Redis | null): SignInThrottle {
    const counter = (keyPrefix: string, points: number): Counter => {
      const memory = (prefix: string) =>
        new RateLimiterMemory({ keyPrefix: prefix, points, duration: WINDOW_SECONDS });
      const limiter =
        redis === null
          ? memory(keyPrefix)
          : new RateLimiterRedis({
              storeClient: redis,
              keyPrefix: `safety-api:${keyPrefix}`,
              points,
              duration: WINDOW_SECONDS,
              insuranceLimiter: memory(`${keyPrefix}:insurance`),
            });
      return { limiter, points };
    };
    return new SignInThrottle(
      counter('admin-sign-in-email', FAILURES_PER_EMAIL),
      counter('admin-sign-in-address', FAILURES_PER_ADDRESS),
    );
  }

  /** Seconds to wait before this email may be tried from this address again, or 0 if it may now. */
  async secondsToWait(email: string, address: string): Promise<number> {
    const waits = await Promise.all([
      this.wait(this.byEmail, email.trim().toLowerCase()),
      this.wait(this.byAddress, address),
    ]);
    return Math.max(...waits);
  }

  async recordFailure(email: string, address: string): Promise<void> {
    await Promise.all([
      this.count(this.byEmail, email.trim().toLowerCase()),
      this.count(this.byAddress, address),
    ]);
  }

  /** A correct password clears the email's count, so a person's earlier typos do not linger. */
  async recordSuccess(email: string): Promise<void> {
    await this.byEmail.limiter.delete(email.trim().toLowerCase());
  }

  private async wait(counter: Counter, key: string): Promise<number> {
    const res = await counter.limiter.get(key);
    if (res === null || res.consumedPoints < counter.points) return 0;
    return Math.max(Math.ceil(res.msBeforeNext / 1000), 1);
  }

  private async count(counter: Counter, key: string): Promise<void> {
    try {
      await counter.limiter.consume(key);
    } catch (refusal) {
      // A refusal (the count is already over the limit) is a RateLimiterRes, not a failure.
      if (refusal instanceof Error) throw refusal;
    }
  }
}
