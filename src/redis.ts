import { Command, Redis, type RedisOptions } from 'ioredis';
import { ConfigError, parseRedisUrl, type RedisTarget } from './config.ts';

/**
 * How long Redis may take to answer one command before its caller falls back to in-memory
 * counting (or, for the shared generation, to reading PostgreSQL): from the command's write to the
 * socket until its reply could have been read (`RedisConnection`).
 */
export const REDIS_COMMAND_TIMEOUT_MS = 200;
const REDIS_CONNECT_TIMEOUT_MS = 1000;
/** How soon a connection ioredis gave up on midway is connected again (`RedisConnection.connect`). */
const RECONNECT_AFTER_ABANDON_MS = 100;

/**
 * After a Redis command is late, the process's connections refuse every command for `retryAfterMs`
 * instead of sending it (`RedisConnection`), and every user of Redis does without it meanwhile (the
 * rate limiters count in memory, the key lookup reads PostgreSQL): while Redis is frozen, one
 * request a second waits for the deadline instead of every one, and no request waits for it twice
 * (a 304's count and its refund; a count, then a read of the shared generation on another
 * connection; a sign-in's two throttles). One per process, shared by all its connections
 * (`openRuntime`).
 */
export class RedisSuspicion {
  private until = 0;

  private readonly retryAfterMs: number;

  constructor(retryAfterMs = 1000) {
    this.retryAfterMs = retryAfterMs;
  }

  /** Whether a command was late within the last `retryAfterMs`: Redis is best not asked now. */
  get suspect(): boolean {
    return Date.now() < this.until;
  }

  /** A command was late: opens the period, unless one is already open. */
  failed(): void {
    if (!this.suspect) this.until = Date.now() + this.retryAfterMs;
  }
}

/**
 * An ioredis connection whose commands have a deadline judged on Redis's lateness, not on the
 * event loop's. ioredis' own `commandTimeout` is a timer, and timers run at the start of a turn of
 * the event loop, before the turn reads its sockets: when the loop was busy for longer than the
 * timeout (a burst of requests after an outage, a restart's first compilations, an import), a reply
 * that came back within a millisecond was still unread when the timer fired, so a healthy Redis
 * looked slow and the request was counted per instance. Here the timer only asks for a verdict in
 * `setImmediate`, which runs after that turn has read its sockets: a command is late only if its
 * reply has still not come. The clock starts when ioredis writes the command, which for
 * auto-pipelined commands is when their batch is written, not when they were queued for it.
 *
 * A late command opens `suspicion`, and while it is open every command but the connection's own
 * handshake is refused at once instead of sent. So a caller meets at most one deadline however many
 * commands it sends, and the batch that ioredis' auto-pipelining holds back until the late one is
 * settled (it sends one batch at a time) is refused rather than sent to wait a second deadline.
 */
class RedisConnection extends Redis {
  private readonly suspicion: RedisSuspicion;
  /** Batches of commands, and whether each is refused (`refuses`). */
  private readonly batches: WeakMap<object, boolean>;
  /**
   * Commands written and not answered yet, in the order written, each under its deadline: one
   * written again after a reconnection keeps the one it had.
   */
  private readonly unanswered: Set<Command>;
  /** `disconnect()` was called: the connection is not to be connected again. */
  private closing: boolean;

  constructor(target: RedisTarget, options: RedisOptions, suspicion: RedisSuspicion) {
    if (target.kind === 'server') super(target.url, options);
    else
      super({
        ...options,
        sentinels: target.sentinels,
        name: target.name,
        username: target.username,
        password: target.password,
        db: target.db,
        // A Sentinel that does not answer is skipped for the next one, not waited on.
        sentinelCommandTimeout: REDIS_CONNECT_TIMEOUT_MS,
        // Moves at the Sentinels' `+switch-master`, even while the old primary still answers.
        failoverDetector: true,
      });
    this.suspicion = suspicion;
    this.batches = new WeakMap();
    this.unanswered = new Set();
    this.closing = false;
  }

  override sendCommand(...args: Parameters<Redis['sendCommand']>): unknown {
    const [command, batch] = args;
    if (this.refuses(command, batch)) {
      command.reject(new Error('Redis is not asked for a moment: a command was late'));
      return command.promise;
    }
    if (!this.unanswered.has(command)) this.setDeadline(command);
    return super.sendCommand(...args);
  }

  /**
   * Whether `command` is refused rather than sent: while `suspicion` is open, unless it is part of
   * the connection's own handshake. The commands of a batch (auto-pipelined, or a transaction) are
   * handed over one by one and written together once the last one is: the batch is decided once,
   * at its first command, since a batch written in part would leave ioredis waiting for replies to
   * commands never sent, and every later reply given to the wrong command.
   */
  private refuses(command: Command, batch: Parameters<Redis['sendCommand']>[1]): boolean {
    if (this.status !== 'ready') return false;
    if (batch === undefined || !('isPipeline' in batch)) {
      return this.suspicion.suspect && !Command.checkFlag('HANDSHAKE_COMMANDS', command.name);
    }
    let refused = this.batches.get(batch);
    if (refused === undefined) {
      refused = this.suspicion.suspect;
      this.batches.set(batch, refused);
    }
    return refused;
  }

  private setDeadline(command: Command): void {
    this.unanswered.add(command);
    const timer = setTimeout(() => setImmediate(() => this.judge(command)), REDIS_COMMAND_TIMEOUT_MS);
    const answered = () => {
      this.unanswered.delete(command);
      clearTimeout(timer);
    };
    command.promise.then(answered, answered);
  }

  /**
   * `command` is past its deadline, and the loop has read its sockets since: unanswered, it is
   * late. So is every command written after it on this connection, since Redis answers in order.
   * They fail with it rather than at deadlines of their own: otherwise the batch that ioredis holds
   * back until they are settled would keep a request that came after the failure waiting for most
   * of a second deadline.
   */
  private judge(command: Command): void {
    if (!this.unanswered.has(command)) return;
    // Before the rejections: whatever their callers send next is refused, not sent.
    this.suspicion.failed();
    const late = new Error(`Redis did not answer within ${REDIS_COMMAND_TIMEOUT_MS} ms`);
    for (const waiting of [...this.unanswered]) waiting.reject(late);
  }

  /**
   * ioredis ends a connection for good (status `end`, nothing connects it again) when an attempt to
   * connect is abandoned midway. With Sentinels that happens in a failover: the failover detector
   * of the last connection made stays subscribed while the connection tries the dead primary again
   * and again, and when the Sentinels announce the switch (`+switch-master`) it abandons whichever
   * attempt is asking them for the primary at that moment. Such a connection is connected again
   * here, unless `disconnect()` closed it.
   */
  override connect(...args: Parameters<Redis['connect']>): Promise<void> {
    const attempt = super.connect(...args);
    attempt.catch(() => {
      if (this.status !== 'end' || this.closing) return;
      setTimeout(() => {
        if (this.status === 'end' && !this.closing) this.connect().catch(() => {});
      }, RECONNECT_AFTER_ABANDON_MS).unref();
    });
    return attempt;
  }

  override disconnect(reconnect = false): void {
    if (!reconnect) this.closing = true;
    const closedAlready = this.stream?.destroyed === true;
    super.disconnect(reconnect);
    // ioredis ends the socket and waits for its 'close' (destroying it after 2 s, on a timer that
    // keeps the process alive). A socket that closed already (refused, or dropped by Redis) never
    // closes again: told here, the wait ends at once, and a command-line process exits when done
    // instead of 2 s later.
    if (closedAlready) this.stream.emit('close');
  }
}

export interface RedisLogger {
  warn(details: object, message: string): void;
  info(details: object, message: string): void;
  debug(details: object, message: string): void;
}

/**
 * How long every connection must stay ready before the recovery is logged. A failover can move a
 * connection twice: Sentinels name the promoted replica a moment before they announce the switch
 * (`+switch-master`), and a connection made in between is closed and made again at the announcement.
 */
const RECOVERY_QUIET_MS = 1000;

/**
 * Turns what the process's Redis connections go through into one warn line when it loses Redis
 * (the primary died or failed over, the network between) and one info line, naming the primary,
 * once every connection it watches has been ready again for `RECOVERY_QUIET_MS`: not a line per
 * connection, error or attempt. Only a connection that was ready can be lost; Redis not answering
 * at start is the opener's to say. At `debug`, each connection's own steps are logged as well
 * (ready at an address, closed, ended, an error), numbered in the order the connections were
 * watched.
 */
export class RedisAvailability {
  private readonly connections: Redis[] = [];
  /** The address of the primary last connected to; `null` until one was. */
  private primary: string | null = null;
  private lostAt: number | null = null;
  private recovery: NodeJS.Timeout | null = null;

  private readonly logger: RedisLogger;

  constructor(logger: RedisLogger) {
    this.logger = logger;
  }

  watch(redis: Redis): void {
    this.connections.push(redis);
    const connection = this.connections.length;
    redis.on('ready', () => {
      this.primary = `${redis.stream.remoteAddress}:${redis.stream.remotePort}`;
      this.logger.debug({ connection, address: this.primary }, 'Redis connection ready');
      if (this.lostAt === null || !this.allReady()) return;
      this.cancelRecovery();
      const backAt = Date.now();
      this.recovery = setTimeout(() => this.recovered(backAt), RECOVERY_QUIET_MS).unref();
    });
    // A connection that closed and will be tried again; `disconnect()` (shutdown) emits none.
    redis.on('reconnecting', (delayMs: number) => {
      this.logger.debug({ connection, delayMs }, 'Redis connection closed: connecting again');
      this.cancelRecovery();
      if (this.lostAt !== null || this.primary === null) return;
      this.lostAt = Date.now();
      this.logger.warn(
        { primary: this.primary },
        'Redis unavailable: rate limits are counted per instance until it is back',
      );
    });
    redis.on('error', (error: Error) => {
      this.logger.debug({ connection, error: error.message }, 'Redis connection error');
    });
    // Closed for good: by `disconnect()`, or by ioredis itself (`RedisConnection.connect`).
    redis.on('end', () => this.logger.debug({ connection }, 'Redis connection ended'));
  }

  private allReady(): boolean {
    return this.connections.every((connection) => connection.status === 'ready');
  }

  private cancelRecovery(): void {
    if (this.recovery !== null) clearTimeout(this.recovery);
    this.recovery = null;
  }

  private recovered(backAt: number): void {
    this.recovery = null;
    if (this.lostAt === null || !this.allReady()) return;
    this.logger.info(
      { primary: this.primary, downForMs: backAt - this.lostAt },
      'Redis available again: rate limits are shared again',
    );
    this.lostAt = null;
  }
}

/**
 * A connection to REDIS_URL: one server (`redis://`, `rediss://`), or whichever server the Sentinels
 * name primary (`redis+sentinel://`), followed to the replica they promote when it fails. The
 * process opens one for the public rate limiter and the sign-in throttles (and one more for the
 * rate limiter with a shared generation, see `openRuntime`), all with the process's one
 * `suspicion`. Commands fail fast instead of queueing while Redis is away, and fail after
 * `REDIS_COMMAND_TIMEOUT_MS` when Redis is there but does not answer (frozen, overloaded): every
 * user of it has an in-memory insurance limiter that counts meanwhile, so no request waits on Redis
 * for long. `availability` hears of the connection's outages.
 */
export function openRedis(
  redisUrl: string,
  availability?: RedisAvailability,
  suspicion = new RedisSuspicion(),
): Redis {
  const problems: string[] = [];
  const target = parseRedisUrl(redisUrl, problems);
  if (target === null) throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  // Auto-pipelining sends the counts of concurrent requests in one write: fewer syscalls under load.
  // No `commandTimeout`: the connection keeps its own deadline (`RedisConnection`). No retries: a
  // command under way when its connection closes fails then, rather than at the next failed attempt
  // to connect or at its deadline, and is not sent again to a new primary that may count it twice.
  const options: RedisOptions = {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    enableAutoPipelining: true,
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
  };
  const redis = new RedisConnection(target, options, suspicion);
  redis.on('error', () => {
    // Reconnection is automatic and the insurance limiters cover the gap; errors are not fatal.
  });
  availability?.watch(redis);
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
