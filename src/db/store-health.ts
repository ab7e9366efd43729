import { outsideRequest } from './store-context.ts';

/**
 * What "the store is unavailable" means, decided in one place below every user of the store, so
 * the public API, the wider API, the admin panel and the OAuth endpoints all answer an outage the
 * same way (503 + Retry-After) instead of a 500 or an "invalid token".
 */

/** How `StoreMonitor` names a failed call that no repository operation issued. */
export const UNNAMED_OPERATION = '(outside the repositories)';

/**
 * The server's deadline for one store call: a PostgreSQL connect or wait for a pooled connection,
 * a PostgreSQL statement, a SQLite statement meeting another process's write lock.
 */
export const STORE_DEADLINE_MS = 2000;

/** Seconds a client is asked to wait before retrying while the store is unavailable. */
export const STORE_RETRY_AFTER_SECONDS = 5;

/** Our own deadlines and limits: a query or lock wait that ran out, a pool queue that is full. */
export class StoreUnavailableError extends Error {
  override name = 'StoreUnavailableError';
}

// Node's socket errors: the server is gone, unreachable or not yet there.
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);

// SQLSTATEs of a server that is shutting down, refusing or overloaded (not of a bad query):
// 57P01-57P03 admin/crash shutdown and "cannot connect now", 53300 too many connections,
// 57014 a statement cancelled by our statement_timeout.
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300', '57014']);

// pg's and pg-pool's own messages for a connection that died, never came or timed out.
const PG_CONNECTION_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'is not queryable',
  'Cannot use a pool after calling end',
];

function isUnavailableOne(error: unknown): boolean {
  if (error instanceof StoreUnavailableError) return true;
  if (!(error instanceof Error)) return false;
  const code = (error as Error & { code?: unknown }).code;
  if (typeof code === 'string') {
    if (NETWORK_CODES.has(code) || UNAVAILABLE_SQLSTATES.has(code)) return true;
    // Class 08: connection exceptions.
    if (/^08[0-9A-Z]{3}$/.test(code)) return true;
    // 55000 is broad; only "database is not currently accepting connections" is an outage.
    if (code === '55000' && /accepting connections/i.test(error.message)) return true;
    // Another process holds SQLite's write lock (SQLITE_BUSY, SQLITE_BUSY_SNAPSHOT, ...).
    if (code.startsWith('SQLITE_BUSY')) return true;
  }
  return PG_CONNECTION_MESSAGES.some((text) => error.message.includes(text));
}

/** True when `error` (or an error it wraps) means the store cannot be reached or used right now. */
export function isStoreUnavailable(error: unknown): boolean {
  let current: unknown = error;
  // Bounded: a cause chain can in principle loop.
  for (let depth = 0; depth < 5 && current !== undefined && current !== null; depth += 1) {
    if (isUnavailableOne(current)) return true;
    current = current instanceof Error ? current.cause : undefined;
  }
  return false;
}

export interface MonitorLogger {
  warn(details: object, message: string): void;
  info(details: object, message: string): void;
}

/**
 * Turns a stream of failed queries into one warn line when the store becomes unavailable and one
 * info line when it is back: once down, a cheap probe runs about every second until it succeeds
 * and no request has failed for `quietMs`. The second condition matters when only part of the
 * store is stuck (a long lock on one table): the probe's `select 1` succeeds while the requests
 * that read that table keep failing, and without it the log would alternate down and up lines.
 * Requests keep trying the store meanwhile (with their deadlines), so recovery needs no restart.
 *
 * Both lines name what failed by the repository operation that issued it (`store-context.ts`),
 * never by its SQL or parameters: the warn line the first failure, the info line every operation
 * that failed during the outage with its count. So a statement that hit its timeout is always
 * named, without a line per request.
 */
export class StoreMonitor {
  private down = false;
  private since = 0;
  private lastFailure = 0;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  /** Failures of the current outage, by operation. */
  private failed = new Map<string, number>();

  private readonly probe: () => Promise<unknown>;
  private readonly logger: MonitorLogger;
  private readonly probeIntervalMs: number;
  private readonly quietMs: number;

  /**
   * `quietMs` lies beyond the longest deadline of a request (PostgreSQL's 2.5 s budget), so a
   * request that was stuck when the probe succeeded has had time to fail and be reported.
   */
  constructor(probe: () => Promise<unknown>, logger: MonitorLogger, probeIntervalMs = 1000, quietMs = 3000) {
    this.probe = probe;
    this.logger = logger;
    this.probeIntervalMs = probeIntervalMs;
    this.quietMs = quietMs;
  }

  get available(): boolean {
    return !this.down;
  }

  /**
   * Notes a failed store call, issued by `operation` (`currentOperation()`; unnamed: SQL outside
   * the repositories); only unavailability counts, other errors are the caller's.
   */
  report(error: unknown, operation = UNNAMED_OPERATION): void {
    if (this.closed || !isStoreUnavailable(error)) return;
    this.lastFailure = Date.now();
    this.failed.set(operation, (this.failed.get(operation) ?? 0) + 1);
    if (this.down) return;
    this.down = true;
    this.since = this.lastFailure;
    const reason = error instanceof Error ? error.message : String(error);
    this.logger.warn({ reason, operation }, 'store unavailable: answering 503 until it is back');
    this.scheduleProbe();
  }

  close(): void {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private scheduleProbe(): void {
    if (this.closed) return;
    // One probe at a time: the next is scheduled only when the previous one has finished. It is
    // the monitor's own work, not that of the request whose failure started it.
    this.timer = outsideRequest(() =>
      setTimeout(() => {
        this.timer = null;
        this.probe().then(
          () => {
            if (this.closed) return;
            if (Date.now() - this.lastFailure < this.quietMs) return this.scheduleProbe();
            this.down = false;
            const failed = Object.fromEntries(this.failed);
            this.failed = new Map();
            this.logger.info({ downForMs: Date.now() - this.since, failed }, 'store available again');
          },
          () => this.scheduleProbe(),
        );
      }, this.probeIntervalMs),
    );
    this.timer.unref();
  }
}
