import type { Redis } from 'ioredis';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { KeyLookup } from '../auth/key-lookup.ts';
import { LastUseRecorder } from '../auth/last-use.ts';
import { PublicRateLimiter } from '../auth/rate-limit.ts';
import { SignIn } from '../auth/sign-in.ts';
import type { Config } from '../config.ts';
import { type DatabaseHandle, openDatabase } from '../db/database.ts';
import { migrateToLatest } from '../db/migrate.ts';
import type { Database } from '../db/schema.ts';
import { openRedis, redisReady } from '../redis.ts';

/** The long-lived resources of one server process, opened together and closed together. */
export interface Services {
  database: DatabaseHandle;
  /** The one Redis connection (REDIS_URL), or `null`: counts are then kept in process memory. */
  redis: Redis | null;
  keyLookup: KeyLookup;
  rateLimiter: PublicRateLimiter;
  lastUse: LastUseRecorder;
  /** The one sign-in throttle of the process, shared by the admin panel and the OAuth sign-in. */
  signIn: SignIn;
  close(): Promise<void>;
}

export async function openServices(
  config: Config,
  logger: Pick<Logger, 'warn' | 'error'>,
): Promise<Services> {
  const database = openDatabase(config.databaseUrl, (error) =>
    logger.warn({ err: error }, 'an idle PostgreSQL connection was lost; it will be replaced'),
  );
  try {
    await migrateToLatest(database.db);
  } catch (error) {
    await database.destroy();
    throw error;
  }

  const redis = config.redisUrl === null ? null : openRedis(config.redisUrl);
  if (redis !== null && !(await redisReady(redis))) {
    logger.warn('Redis is not answering: rate limits are counted per instance until it does');
  }
  const rateLimiter = new PublicRateLimiter(redis);

  const lastUse = new LastUseRecorder(database.db as Kysely<Database>, (error) =>
    logger.error({ err: error }, 'could not record API key use'),
  );

  return {
    database,
    redis,
    keyLookup: new KeyLookup(database.db, database.commitWatch),
    rateLimiter,
    lastUse,
    signIn: SignIn.create(redis),
    async close() {
      await lastUse.close();
      redis?.disconnect();
      await database.destroy();
    },
  };
}
