import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { LastUseRecorder } from '../auth/last-use.ts';
import { PublicRateLimiter } from '../auth/rate-limit.ts';
import type { Config } from '../config.ts';
import { type DatabaseHandle, openDatabase } from '../db/database.ts';
import { migrateToLatest } from '../db/migrate.ts';
import type { Database } from '../db/schema.ts';

/** The long-lived resources of one server process, opened together and closed together. */
export interface Services {
  database: DatabaseHandle;
  rateLimiter: PublicRateLimiter;
  lastUse: LastUseRecorder;
  close(): Promise<void>;
}

export async function openServices(
  config: Config,
  logger: Pick<Logger, 'warn' | 'error'>,
): Promise<Services> {
  const database = openDatabase(config.databaseUrl);
  try {
    await migrateToLatest(database.db);
  } catch (error) {
    await database.destroy();
    throw error;
  }

  const rateLimiter =
    config.redisUrl === null ? PublicRateLimiter.inMemory() : PublicRateLimiter.withRedis(config.redisUrl);
  if (!(await rateLimiter.ready())) {
    logger.warn('Redis is not answering: rate limits are counted per instance until it does');
  }

  const lastUse = new LastUseRecorder(database.db as Kysely<Database>, (error) =>
    logger.error({ err: error }, 'could not record API key use'),
  );

  return {
    database,
    rateLimiter,
    lastUse,
    async close() {
      await lastUse.close();
      await rateLimiter.close();
      await database.destroy();
    },
  };
}
