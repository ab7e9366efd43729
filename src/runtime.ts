import type { Redis } from 'ioredis';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { KeyLookup } from './auth/key-lookup.ts';
import { KeyUsageRecorder } from './auth/key-usage.ts';
import { LastUseRecorder } from './auth/last-use.ts';
import { PublicRateLimiter } from './auth/rate-limit.ts';
import { SharedGeneration } from './auth/shared-generation.ts';
import { SignIn } from './auth/sign-in.ts';
import { type Config, cacheBudgets } from './config.ts';
import { type DatabaseHandle, isInMemory, openServerDatabase } from './db/database.ts';
import { checkMigrated, type MigrationReport, migrateThrough, migrateToLatest } from './db/migrate.ts';
import type { Database } from './db/schema.ts';
import { isStoreUnavailable } from './db/store-health.ts';
import { openRedis, RedisAvailability, RedisSuspicion, redisReady } from './redis.ts';
import { MailService } from './services/mail-service.ts';
import { buildServices, type Services } from './services/services.ts';
import { WebhookDispatcher } from './webhooks/delivery.ts';
import { HostRateLimiter } from './webhooks/host-rate.ts';
import { OutboundClient } from './webhooks/outbound.ts';

/** One line for what the start applied, one for the migrations of a newer release it serves beside. */
function logMigrations(
  { applied, newer }: MigrationReport,
  log: { info(details: object, message: string): void },
): void {
  if (applied.length > 0) log.info({ migrations: applied }, `applied migrations ${applied.join(', ')}`);
  if (newer.length > 0) {
    log.info(
      { migrations: newer },
      `the database has additive migrations of a newer release (${newer.join(', ')}): serving beside them`,
    );
  }
}

/**
 * The composition root of a server process: everything long-lived it runs on, built here in
 * dependency order and handed what each needs (the store, Redis, the caches, the services, the
 * webhook deliveries), and closed together. `server.ts` opens it and gives it to `buildApp`, which
 * hands its parts to the routes as decorators of the Fastify instance; tests open it as the server
 * does. A command builds the services it needs on its own handle with the same `buildServices`.
 */
export interface Runtime {
  database: DatabaseHandle;
  /**
   * The shared Redis connection (REDIS_URL), or `null`: counts are then kept in process memory.
   * With a shared generation, the public rate limiter counts on a second connection of its own.
   */
  redis: Redis | null;
  keyLookup: KeyLookup;
  /** PostgreSQL with Redis only: what writers bump after their commits (`SharedGeneration`). */
  sharedGeneration: SharedGeneration | null;
  rateLimiter: PublicRateLimiter;
  lastUse: LastUseRecorder;
  /** Requests per key, hour and outcome, counted in memory and added to the store every 10 s. */
  keyUsage: KeyUsageRecorder;
  /** The one sign-in throttle of the process, shared by the admin panel and the OAuth sign-in. */
  signIn: SignIn;
  /** The guarded HTTP client of webhook deliveries, test events and URL checks. */
  outbound: OutboundClient;
  /** The services built on the database (`buildServices`). */
  services: Services;
  /** The webhook deliveries of this instance: `server.ts` starts them (tests start theirs when they need them). */
  delivery: WebhookDispatcher;
  /** Mail to Super Admins (SMTP_URL), or `null`: `server.ts` starts its key-expiry scan. */
  mail: MailService | null;
  close(): Promise<void>;
}

export async function openRuntime(
  config: Config,
  logger: Pick<Logger, 'warn' | 'error'> & Partial<Pick<Logger, 'info' | 'debug'>>,
): Promise<Runtime> {
  // Where the stores say they went away and came back (a test's logger may have no `info` or `debug`).
  const availabilityLog = {
    warn: (details: object, message: string) => logger.warn(details, message),
    info: (details: object, message: string) =>
      logger.info === undefined ? logger.warn(details, message) : logger.info(details, message),
    debug: (details: object, message: string) => logger.debug?.(details, message),
  };
  // An in-memory SQLite database exists only in its one handle: it is migrated on the server's
  // below, whatever MIGRATE_ON_START says (nothing else could migrate it).
  const inMemory = isInMemory(config.databaseUrl);
  if (!inMemory) {
    const report = config.migrateOnStart
      ? await migrateThrough(config.databaseUrl, config.migrationDatabaseUrl, {
          onWait: () => availabilityLog.info({}, 'another process is applying migrations: waiting for it'),
        })
      : await checkMigrated(config.databaseUrl);
    logMigrations(report, availabilityLog);
  }
  const caches = cacheBudgets(config.cacheMaxMb);
  const database = openServerDatabase(config.databaseUrl, {
    logger: availabilityLog,
    caches,
    onIdleError: (error) =>
      logger.warn({ err: error }, 'an idle PostgreSQL connection was lost; it will be replaced'),
  });
  if (inMemory) {
    try {
      logMigrations(await migrateToLatest(database.db), availabilityLog);
    } catch (error) {
      await database.destroy();
      throw error;
    }
  }

  // One line when the process loses Redis and one when it is back, whichever connections saw it.
  const redisAvailability = new RedisAvailability(availabilityLog);
  // A command late on one connection spares every user of either connection its deadline for a while.
  const redisSuspicion = new RedisSuspicion();
  const redis =
    config.redisUrl === null ? null : openRedis(config.redisUrl, redisAvailability, redisSuspicion);
  if (redis !== null && !(await redisReady(redis))) {
    logger.warn('Redis is not answering: rate limits are counted per instance until it does');
  }
  // SQLite's commit watch sees every commit by itself; PostgreSQL needs writers to say so.
  const sharedGeneration =
    redis !== null && !database.store.seesOtherProcessesCommits
      ? await SharedGeneration.open(redis, database.db, redisSuspicion)
      : null;
  // Where the count reads the generation, it has a connection of its own: ioredis keeps one script
  // per command name and connection, and rate-limiter-flexible names every counting script alike,
  // so the sign-in throttles' limiters would replace this one's.
  const countingRedis =
    sharedGeneration === null || config.redisUrl === null
      ? redis
      : openRedis(config.redisUrl, redisAvailability, redisSuspicion);
  if (countingRedis !== redis && countingRedis !== null) await redisReady(countingRedis);
  const rateLimiter = new PublicRateLimiter(countingRedis, {
    generationKey: sharedGeneration?.key ?? null,
    windowBytes: caches.rateLimitWindows,
    suspicion: redisSuspicion,
  });

  const lastUse = new LastUseRecorder(database.db as Kysely<Database>, (error) => {
    // An outage is logged once by the store monitor; the uses wait for the next pass.
    if (!isStoreUnavailable(error)) logger.error({ err: error }, 'could not record API key use');
  });

  const keyUsage = new KeyUsageRecorder(database.db, (error) => {
    if (!isStoreUnavailable(error)) logger.error({ err: error }, 'could not record API key usage');
  });

  const keyLookup = new KeyLookup(database.db, database.commitWatch ?? sharedGeneration, caches.keyRows);
  // Replication to Redis replicas is asynchronous: a failover can lose the last bumps, so that
  // the value some rows were read under comes back although writes happened since. A failover
  // closes the connections (Sentinel's CLIENT KILL, or the old primary gone), and so does any
  // outage: whatever the generation reads after one, no row read before it is served again.
  if (sharedGeneration !== null) {
    for (const connection of new Set([redis, countingRedis]))
      connection?.on('close', () => keyLookup.forgetAll());
  }

  const outbound = new OutboundClient({
    allowPrivate: config.webhooksAllowPrivate,
    timeoutMs: config.webhookTimeoutMs,
  });
  const services = buildServices(database, config, outbound);
  const mail =
    config.smtpUrl === null
      ? null
      : new MailService(
          database.db,
          { smtpUrl: config.smtpUrl, from: config.mailFrom, baseUrl: config.baseUrl },
          availabilityLog,
        );
  const delivery = new WebhookDispatcher({
    db: database.db,
    // The worker sits below the services: it reads the feed and the secrets through them, and
    // tells of an endpoint in trouble through the mail service.
    feed: services.changeFeed,
    secrets: services.webhooks,
    notices: mail,
    store: database.store,
    // LISTEN needs a session of its own: through MIGRATION_DATABASE_URL (a direct or session-mode
    // route) when DATABASE_URL goes through a transaction-mode pooler, which drops notifications.
    databaseUrl: config.migrationDatabaseUrl,
    outbound,
    // The rate per destination host: shared by the instances through Redis, when there is one.
    hostRate: new HostRateLimiter(config.webhookHostRate, redis, redisSuspicion),
    leaseSeconds: config.webhookLeaseSeconds,
    timeoutMs: config.webhookTimeoutMs,
    disableAfterHours: config.webhookDisableAfterHours,
    logger: {
      info: (details, message) =>
        logger.info === undefined ? logger.warn(details, message) : logger.info(details, message),
      warn: (details, message) => logger.warn(details, message),
      error: (details, message) => logger.error(details, message),
    },
  });

  return {
    database,
    redis,
    keyLookup,
    sharedGeneration,
    rateLimiter,
    lastUse,
    keyUsage,
    signIn: SignIn.create(redis),
    outbound,
    services,
    delivery,
    mail,
    async close() {
      // All write to the store, each within its deadline: side by side, so that a store that does
      // not answer costs the shutdown one deadline, not two.
      await Promise.all([delivery.stop(), lastUse.close(), keyUsage.close()]);
      await mail?.close();
      await outbound.close();
      if (countingRedis !== redis) countingRedis?.disconnect();
      redis?.disconnect();
      await database.destroy();
    },
  };
}
