import type { Redis } from 'ioredis';
import { Counter } from 'prom-client';
import { cacheBudgets, DEFAULT_CACHE_MAX_MB } from '../config.ts';
import { ENTRY_OVERHEAD_BYTES, Lru } from '../lib/lru.ts';
import { RedisSuspicion } from '../redis.ts';
import {
  type IRateLimiterRedisOptions,
  type RateLimiterAbstract,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
} from 'rate-limiter-flexible';

/**
 * Hourly request allowance per API key: a fixed window that opens at the key's first counted
 * request. The allowance belongs to the account and may change at any time, so the limiter only
 * counts and the comparison with the allowance happens per request.
 */

export interface RateLimitWindow {
  allowed: boolean;
  /** When the window this request was counted in ends, in Unix milliseconds: what `refund` needs. */
  endsAtMs: number;
  remaining: number;
  /** Absolute Unix time, in seconds, at which the window resets. */
  resetEpochSeconds: number;
  /** Whole seconds until the window resets, at least 1. */
  retryAfterSeconds: number;
  /**
   * The shared generation (`SharedGeneration`) as Redis held it when it counted this request, read
   * in the same round trip; `null` when it was not read: no generation key, no value yet, or the
   * count was made in process memory.
   */
  generation: string | null;
}

const WINDOW_SECONDS = 3600;
/**
 * A refund is given only while its window has more than this left: the check and the refund are
 * two store commands, and a refund that landed after the window rolled over would open the next
 * window below zero. Losing the odd refund in a window's last second costs the caller one request.
 */
const REFUND_MARGIN_MS = 1000;
// The counter itself never refuses: the account's allowance is compared per request.
const UNBOUNDED_POINTS = Number.MAX_SAFE_INTEGER;

/**
 * The per-instance count used while Redis fails or is slow. rate-limiter-flexible turns to its
 * insurance limiter silently; counting each use here makes the fallback visible in /metrics.
 */
class CountedFallbackLimiter extends RateLimiterMemory {
  private readonly uses: Counter;

  constructor(options: ConstructorParameters<typeof RateLimiterMemory>[0], uses: Counter) {
    super(options);
    this.uses = uses;
  }

  override consume(...args: Parameters<RateLimiterMemory['consume']>): Promise<RateLimiterRes> {
    // One count may carry several requests (`PublicRateLimiter.countTurn`), and refunds do not pass here.
    this.uses.inc(args[1] ?? 1);
    return super.consume(...args);
  }
}

/**
 * A Lua string literal of `text`: every byte that is not a letter, a digit, `:`, `_` or `-` as a
 * decimal escape, so that no database name can end the literal or change the script around it.
 */
function luaString(text: string): string {
  const bytes = Buffer.from(text, 'utf8');
  return `"${[...bytes].map((b) => (/[A-Za-z0-9:_-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `\\${b}`)).join('')}"`;
}

/**
 * rate-limiter-flexible's counting script (open the window if there is none, add the points, read
 * what is left of the window), which also reads the shared generation: a request is counted, and
 * the key row it was served with is confirmed, in one round trip. The generation is not one of the
 * script's declared keys (the library declares the counter alone), which a single Redis allows;
 * docs/scaling.md says what Redis Cluster needs instead.
 */
function countingScript(generationKey: string): string {
  return `redis.call('set', KEYS[1], 0, 'EX', ARGV[2], 'NX')
local consumed = redis.call('incrby', KEYS[1], ARGV[1])
local ttl = redis.call('pttl', KEYS[1])
if ttl == -1 then
  redis.call('expire', KEYS[1], ARGV[2])
  ttl = 1000 * ARGV[2]
end
return {consumed, ttl, redis.call('get', ${luaString(generationKey)})}`;
}

/** A count made by `countingScript`, with the generation it read. */
class CountWithGeneration extends RateLimiterRes {
  readonly generation: string | null;

  constructor(
    remainingPoints: number,
    msBeforeNext: number,
    consumedPoints: number,
    isFirstInDuration: boolean,
    generation: string | null,
  ) {
    super(remainingPoints, msBeforeNext, consumedPoints, isFirstInDuration);
    this.generation = generation;
  }
}

/**
 * The Redis counter with `countingScript`. `_getRateLimiterRes` is the library's hook for turning
 * a store's reply into a result; besides the script's reply it receives `get`'s, a transaction's
 * `[[error, points], [error, ttl]]`, which has no generation.
 */
class GenerationReadingLimiter extends RateLimiterRedis {
  constructor(options: IRateLimiterRedisOptions, generationKey: string) {
    super({ ...options, customIncrTtlLuaScript: countingScript(generationKey) });
  }

  _getRateLimiterRes(_rlKey: string, changedPoints: number, reply: unknown[]): RateLimiterRes {
    const fromTransaction = Array.isArray(reply[0]);
    const value = (entry: unknown) => (Array.isArray(entry) ? entry[1] : entry);
    const consumed = Number.parseInt(String(value(reply[0])), 10);
    const msBeforeNext = Number(value(reply[1]));
    const generation = !fromTransaction && typeof reply[2] === 'string' ? reply[2] : null;
    return new CountWithGeneration(
      Math.max(this.points - consumed, 0),
      msBeforeNext,
      consumed,
      consumed === changedPoints,
      generation,
    );
  }
}

/** A request waiting for its count: its key's allowance, and where its window goes. */
interface WaitingRequest {
  allowance: number;
  resolve: (window: RateLimitWindow) => void;
  reject: (error: unknown) => void;
}

export class PublicRateLimiter {
  /** Redis with the in-memory insurance count, or the in-memory count alone without Redis. */
  private readonly shared: RateLimiterAbstract;
  /** The insurance count, used directly while Redis is suspect; `null` without Redis. */
  private readonly fallback: CountedFallbackLimiter | null;
  /**
   * The process's Redis failures (`RedisSuspicion`): while one is recent, its connections would
   * refuse the commands anyway, and the insurance counts at once, without going through them.
   */
  private readonly suspicion: RedisSuspicion;
  /** Window ends as first seen, per key (see `stableEnd`), within CACHE_MAX_MB's share. */
  private readonly windowEnds: Lru<string, number>;
  private readonly sameWindowMs: number;
  /** With Redis: the requests waiting for this turn's count, by key (`countTurn`). */
  private readonly waiting = new Map<string, WaitingRequest[]>();
  /** Requests counted per instance because Redis failed or timed out; `/metrics` registers it. */
  readonly fallbackCounter = new Counter({
    name: 'rate_limiter_fallback_total',
    help: 'Public API requests counted in process memory because Redis failed or did not answer in time',
    registers: [],
  });

  /** Whether counts read the shared generation: Redis and a `generationKey` were given. */
  readonly readsGeneration: boolean;
  private readonly windowSeconds: number;

  /**
   * With `redis`, the counts live in Redis, shared by every instance. Should Redis fail, each
   * instance falls back to its own in-memory count (the insurance limiter) rather than refusing or
   * waving requests through. Without it, counts live in this process.
   *
   * `generationKey`: the shared generation's Redis key (`SharedGeneration.key`), read with every
   * count; none where there is no shared generation (SQLite's commit watch needs no Redis).
   * `windowBytes`: the bound of the window ends kept (`cacheBudgets`). `suspicion`: the one the
   * process's Redis connections share (`openRedis`). `keyPrefix` and `windowSeconds` are the
   * tests' to change.
   */
  constructor(
    redis: Redis | null,
    {
      generationKey = null,
      keyPrefix = 'safety-api:rl',
      windowSeconds = WINDOW_SECONDS,
      windowBytes = cacheBudgets(DEFAULT_CACHE_MAX_MB).rateLimitWindows,
      suspicion = new RedisSuspicion(),
    }: {
      generationKey?: string | null;
      keyPrefix?: string;
      windowSeconds?: number;
      windowBytes?: number;
      suspicion?: RedisSuspicion;
    } = {},
  ) {
    this.suspicion = suspicion;
    this.windowEnds = new Lru(windowBytes, (_end, keyId) => keyId.length * 2 + ENTRY_OVERHEAD_BYTES);
    this.windowSeconds = windowSeconds;
    this.readsGeneration = redis !== null && generationKey !== null;
    this.sameWindowMs = Math.min(1000, (windowSeconds * 1000) / 2);
    if (redis === null) {
      this.fallback = null;
      this.shared = new RateLimiterMemory({ keyPrefix, points: UNBOUNDED_POINTS, duration: windowSeconds });
      return;
    }
    const fallback = new CountedFallbackLimiter(
      { keyPrefix: `${keyPrefix}:insurance`, points: UNBOUNDED_POINTS, duration: windowSeconds },
      this.fallbackCounter,
    );
    this.fallback = fallback;
    const options: IRateLimiterRedisOptions = {
      storeClient: redis,
      keyPrefix,
      points: UNBOUNDED_POINTS,
      duration: windowSeconds,
      // Disconnected: straight to the insurance count, without trying the command first.
      rejectIfRedisNotReady: true,
      insuranceLimiter: fallback,
    };
    this.shared =
      generationKey === null
        ? new RateLimiterRedis(options)
        : new GenerationReadingLimiter(options, generationKey);
  }

  /** Where this call counts: Redis (with its insurance), or the insurance alone while Redis is suspect. */
  private get limiter(): RateLimiterAbstract {
    return this.fallback !== null && this.suspicion.suspect ? this.fallback : this.shared;
  }

  /**
   * Counts one request of `keyId`; a refused request is not counted. With Redis, the requests of a
   * key that arrive in one turn of the event loop are counted together (`countTurn`).
   */
  consume(keyId: string, allowance: number): Promise<RateLimitWindow> {
    return new Promise((resolve, reject) => {
      const request = { allowance, resolve, reject };
      if (this.fallback === null) {
        // count() never rejects: it answers each request, a failure included.
        void this.count(keyId, [request]);
        return;
      }
      const waiting = this.waiting.get(keyId);
      if (waiting !== undefined) {
        waiting.push(request);
        return;
      }
      this.waiting.set(keyId, [request]);
      if (this.waiting.size === 1) setImmediate(() => this.countTurn());
    });
  }

  /**
   * Counts the requests that waited during this turn, one store command per key however many
   * requests it had: under load a turn carries dozens of requests, often of one key, and the
   * Redis round trip is most of what such a request costs (docs/performance.md, "Page 1: what a
   * request costs"). Runs in the check phase, after the poll phase that read the requests.
   */
  private countTurn(): void {
    const turn = [...this.waiting];
    this.waiting.clear();
    // count() never rejects: it answers each request, a failure included.
    for (const [keyId, requests] of turn) void this.count(keyId, requests);
  }

  /**
   * Counts `requests` of `keyId` with one command and answers each. Adding n at once and giving
   * the i-th request the count `before + i` is what n separate counts in a row would have done,
   * so every request gets the answer it would have got alone. The refused ones are given back
   * before any is answered. Never rejects: a failure is answered to the requests it concerns.
   */
  private async count(keyId: string, requests: WaitingRequest[]): Promise<void> {
    try {
      const res = await this.limiter.consume(keyId, requests.length);
      const now = Date.now();
      const endsAtMs = this.stableEnd(keyId, now + Math.max(res.msBeforeNext, 0));
      const before = res.consumedPoints - requests.length;
      const counted = requests.map((request, i) => {
        const consumed = before + i + 1;
        const window: RateLimitWindow = {
          generation: res instanceof CountWithGeneration ? res.generation : null,
          allowed: consumed <= request.allowance,
          endsAtMs,
          remaining: Math.max(request.allowance - consumed, 0),
          resetEpochSeconds: Math.ceil(endsAtMs / 1000),
          retryAfterSeconds: Math.max(Math.ceil((endsAtMs - now) / 1000), 1),
        };
        return { request, window };
      });
      const refused = counted.filter(({ window }) => !window.allowed);
      // A refund that fails is the refused requests' failure, not the allowed ones'.
      let refundFailure: { error: unknown } | undefined;
      if (refused[0] !== undefined) {
        try {
          await this.refund(keyId, refused[0].window, refused.length);
        } catch (error) {
          refundFailure = { error };
        }
      }
      for (const { request, window } of counted) {
        if (!window.allowed && refundFailure !== undefined) request.reject(refundFailure.error);
        else request.resolve(window);
      }
    } catch (error) {
      for (const request of requests) request.reject(error);
    }
  }

  /**
   * The end of `keyId`'s window as first seen here. Each count measures it anew as "now + the time
   * left", which moves by the milliseconds between the store's clock reading and ours (more under
   * load or through Redis); rounded up to whole seconds, such a wobble across a second boundary
   * would change X-RateLimit-Reset within one window. A measurement this close to the known end is
   * the same window; a later window ends at least a whole window later.
   */
  private stableEnd(keyId: string, measuredMs: number): number {
    const known = this.windowEnds.get(keyId);
    if (known !== undefined && Math.abs(known - measuredMs) < this.sameWindowMs) return known;
    this.windowEnds.set(keyId, measuredMs);
    return measuredMs;
  }

  /**
   * Gives back `requests` requests counted in `window` (a 304 or a refused request does not
   * count), but only within that same window: once it has rolled over, the requests belong to a
   * count that no longer exists, and there is nothing to give back. Says whether it gave them back.
   */
  async refund(keyId: string, window: RateLimitWindow, requests = 1): Promise<boolean> {
    const current = await this.limiter.get(keyId);
    if (current === null || current.msBeforeNext <= REFUND_MARGIN_MS) return false;
    // The same window ends when it ended at counting (up to the store's round trips); any later
    // window ends at least a whole window later.
    const endsAtMs = Date.now() + current.msBeforeNext;
    if (Math.abs(endsAtMs - window.endsAtMs) >= (this.windowSeconds * 1000) / 2) return false;
    await this.limiter.reward(keyId, requests);
    return true;
  }
}
