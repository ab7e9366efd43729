import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Kysely } from 'kysely';
import { healthRepository } from '../db/repositories/health.ts';
import type { Database } from '../db/schema.ts';
import { RedisSuspicion } from '../redis.ts';

/** How often a bump Redis did not take is tried again (`bumpOrKeepTrying`). */
const BUMP_RETRY_MS = 500;

/**
 * The commit watch of a PostgreSQL deployment: a value in Redis that every writer of keys and
 * accounts (the CLI, the admin panel, imports) replaces after its commit and before it returns, so
 * that every instance can tell, with one Redis read and no SQL, whether a key row it read earlier
 * may have changed since.
 *
 * Each bump writes a fresh random value rather than incrementing a counter: a Redis that restarts
 * empty, or is flushed, can then never hand back a value some row was read under before. Anything
 * the generation cannot tell for sure (Redis not connected, failing, slow, or holding no value yet)
 * is `null`, which makes the caller read PostgreSQL: more reads than needed, never stale rows.
 */
export class SharedGeneration {
  /** A failed bump is being tried again (`bumpOrKeepTrying`). */
  private retrying = false;

  private readonly redis: Redis;
  /** Where the value lives; the rate limiter's counting script reads it too (`PublicRateLimiter`). */
  readonly key: string;
  /** The process's Redis failures: while one is recent, the generation is not read (`null`). */
  private readonly suspicion: RedisSuspicion;

  private constructor(redis: Redis, key: string, suspicion: RedisSuspicion) {
    this.redis = redis;
    this.key = key;
    this.suspicion = suspicion;
  }

  /**
   * The generation of the database `db` is connected to. It is named after the database's own
   * name, so instances that reach one database by different URLs share it; databases of the same
   * name on different servers sharing one Redis would share it too, which costs extra reads only.
   */
  static async open(
    redis: Redis,
    db: Kysely<Database>,
    suspicion = new RedisSuspicion(),
  ): Promise<SharedGeneration> {
    const name = await healthRepository.postgresDatabaseName(db);
    const generation = new SharedGeneration(redis, `safety-api:generation:${name}`, suspicion);
    // The first instance on a new Redis sets one, so that even the first rows read can be reused.
    await generation.current();
    return generation;
  }

  /** The current value, or `null` when it cannot be known: read it before the rows it guards. */
  async current(): Promise<string | null> {
    if (this.redis.status !== 'ready' || this.suspicion.suspect) return null;
    try {
      const value = await this.redis.get(this.key);
      // None yet (a new or emptied Redis): set one, so that rows read from now on can be reused.
      if (value === null) await this.redis.set(this.key, randomUUID(), 'NX');
      return value;
    } catch {
      this.suspicion.failed();
      return null;
    }
  }

  /** Makes every row read before this call unusable on every instance; call it after the commit. */
  async bump(): Promise<void> {
    await this.redis.set(this.key, randomUUID());
  }

  /**
   * `bump`, for a writer with nobody to hand a failure to (the admin panel: the person at it cannot
   * run `cache bump`). When Redis does not take the bump, it is tried again in the background every
   * `BUMP_RETRY_MS` until Redis does, so that the change reaches the instances that saw no outage of
   * their own (those that did dropped their rows already). Several failed bumps share one retry:
   * one bump covers every commit made before it. `report` hears of the first failure and of the
   * bump that finally landed.
   */
  async bumpOrKeepTrying(report: (failure: unknown) => void): Promise<void> {
    try {
      await this.bump();
      return;
    } catch (error) {
      if (this.retrying) return;
      this.retrying = true;
      report(error);
    }
    const retry = () => {
      this.bump().then(
        () => {
          this.retrying = false;
          report(null);
        },
        () => setTimeout(retry, BUMP_RETRY_MS).unref(),
      );
    };
    setTimeout(retry, BUMP_RETRY_MS).unref();
  }
}
