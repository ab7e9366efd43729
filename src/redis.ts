import { Redis } from 'ioredis';

/** How long one Redis command may take before its caller falls back to in-memory counting. */
export const REDIS_COMMAND_TIMEOUT_MS = 200;
const REDIS_CONNECT_TIMEOUT_MS = 1000;

/**
 * The process's one Redis connection (REDIS_URL), shared by the public rate limiter and the
 * sign-in throttles. Commands fail fast instead of queueing while Redis is away, and time out
 * when Redis is there but does not answer (frozen, overloaded): every user of it has an in-memory
 * insurance limiter that counts meanwhile, so no request waits on Redis for long.
 */
export function openRedis(redisUrl: string): Redis {
  // Auto-pipelining sends the counts of concurrent requests in one write: fewer syscalls under load.
  const redis = new Redis(redisUrl, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    enableAutoPipelining: true,
    commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
  });
  redis.on('error', () => {
    // Reconnection is automatic and the insurance limiters cover the gap; errors are not fatal.
  });
  return redis;
}

/** Waits until Redis answers (at most `timeoutMs`); returns false if it did not. */
export function redisReady(redis: Redis, timeoutMs = 3000): Promise<boolean> {
  if (redis.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), timeoutMs);
    redis.once('ready', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}
