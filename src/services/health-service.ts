import type { Redis } from 'ioredis';
import type { Kysely } from 'kysely';
import { healthRepository } from '../db/repositories/health.ts';
import type { Database } from '../db/schema.ts';

type RedisState = 'up' | 'down' | 'not configured';

export interface Readiness {
  /** Whether the instance can serve requests: that needs the database, and only the database. */
  ready: boolean;
  database: 'up' | 'down';
  /** Reported, never a reason to be unready: without Redis, rate limits are counted per instance. */
  redis: RedisState;
}

async function redisState(redis: Redis | null): Promise<RedisState> {
  if (redis === null) return 'not configured';
  try {
    // The connection's own command timeout (about 200 ms) bounds a Redis that does not answer.
    await redis.ping();
    return 'up';
  } catch {
    return 'down';
  }
}

export const healthService = {
  /** Asks both stores at once; each answer is bounded by that store's own deadline. */
  async readiness(db: Kysely<Database>, redis: Redis | null): Promise<Readiness> {
    const [database, redisNow] = await Promise.all([
      healthRepository.ping(db).then(
        () => 'up' as const,
        () => 'down' as const,
      ),
      redisState(redis),
    ]);
    return { ready: database === 'up', database, redis: redisNow };
  },
};
