import type { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import {
  currentOperation,
  REQUEST_STORE_BUDGET_MS,
  type RequestBudget,
  requestBudget,
} from '../store-context.ts';
import { StoreUnavailableError, type StoreMonitor } from '../store-health.ts';
import { copyOutOf } from './snapshots.ts';

/**
 * What a query answers when its store marked it to be copied out (`PostgresStore.copiedQuery`):
 * one row, the COPY text of all its rows.
 */
export interface CopiedRows {
  copy: Buffer;
}

/** What a query made by `PostgresStore.copyInQuery` answers: one row, the number of rows copied. */
export interface CopiedIn {
  copied: number;
}

/**
 * The SQL texts a store marked to run otherwise than as an unnamed statement, kept by the store
 * (`PostgresStore`) and read by its connections: Kysely hands a connection the SQL text and its
 * parameters, nothing more, so the text is how a connection knows what the code asked for. Only
 * the code marks texts, so their number is fixed by the code, never by traffic.
 */
export interface StatementMarks {
  /** Texts each connection prepares once and then runs by name (`Store.prepared`), with their names. */
  readonly prepared: Map<string, string>;
  /** Texts run as `COPY (…) TO STDOUT`, answering `CopiedRows` (`PostgresStore.copiedQuery`). */
  readonly copiedOut: Set<string>;
  /** `COPY … FROM STDIN` texts, their data the one parameter (`PostgresStore.copyInQuery`). */
  readonly copiedIn: Set<string>;
}

export function newStatementMarks(): StatementMarks {
  return { prepared: new Map(), copiedOut: new Set(), copiedIn: new Set() };
}

/** COMMIT, ROLLBACK (to a savepoint too) and RELEASE: what ends a transaction or a savepoint. */
const ENDS_TRANSACTION = /^\s*(commit|rollback|release)\b/i;

/**
 * What a statement begun within its budget is given at least: one that meets the budget's last
 * moments is not failed for want of a few milliseconds. So a request's 503 comes at most this
 * much after its budget; a statement that would begin after the budget is not sent at all.
 */
const PG_MIN_QUERY_MS = 500;

export interface QueryDeadline {
  budgetMs: number;
  monitor: StoreMonitor;
}

/**
 * pg's client as a store's pools make it (`PostgresStore`): it runs the SQL texts its store marked
 * (`StatementMarks`) as they were marked, and gives the server's statements their deadline.
 */
export class PreparingClient extends pg.Client {
  /** Set by the server's subclass (`PostgresStore`); the CLI's queries have no deadline. */
  protected queryDeadline: QueryDeadline | null = null;
  /** Set by the store's subclass: what its code marked. */
  protected marks: StatementMarks = newStatementMarks();
  /** When this connection was asked for, by the pool's user now holding it (`PG_CHECKOUT_BUDGET_MS`). */
  checkedOutAt: number | null = null;

  // pg's `query` has many overloads; this one passes every call on with the same arguments and
  // result, so its declared result (`never`) is only what satisfies all of them at once.
  override query(...args: unknown[]): never {
    const [text, values, ...rest] = args;
    const deadline = this.queryDeadline;
    const operation = currentOperation();
    const budget =
      deadline === null || typeof text !== 'string' || ENDS_TRANSACTION.test(text)
        ? undefined
        : requestBudget();
    // A request whose budget is spent gets its 503 now, not after one more statement; but a
    // transaction's end is always sent: a connection whose ROLLBACK was kept back would go back to
    // the pool inside the transaction, and the next user's statements would run in it.
    if (deadline !== null && budget !== undefined && budget.leftMs <= 0) {
      const error = budgetSpent();
      deadline.monitor.report(error, operation);
      return Promise.reject(error) as never;
    }
    const name = typeof text === 'string' ? this.marks.prepared.get(text) : undefined;
    const call = super.query as (...callArgs: unknown[]) => never;
    const result: unknown =
      typeof text === 'string' && this.marks.copiedOut.has(text) && Array.isArray(values)
        ? this.copied(text, values)
        : typeof text === 'string' && this.marks.copiedIn.has(text) && Array.isArray(values)
          ? this.copiedIn(text, values[0])
          : name !== undefined && Array.isArray(values)
            ? call.call(this, { name, text, values }, ...rest)
            : call.apply(this, args);
    if (deadline === null || !(result instanceof Promise)) return result as never;
    const left = budget?.leftMs ?? (this.checkedOutAt ?? Date.now()) + deadline.budgetMs - Date.now();
    return this.withDeadline(result, Math.max(left, PG_MIN_QUERY_MS), deadline.monitor, {
      operation,
      budget,
    }) as never;
  }

  /** A query marked to be copied out: its COPY text, whole, as the one row of a result. */
  private async copied(
    text: string,
    parameters: unknown[],
  ): Promise<{ rows: CopiedRows[]; command: string }> {
    const stream: Readable = super.query(copyOutOf({ sql: text, parameters }, this));
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    return { rows: [{ copy: Buffer.concat(chunks) }], command: 'COPY' };
  }

  /** A `COPY … FROM STDIN` marked as such: its data streamed in, and the count of rows copied. */
  private async copiedIn(text: string, data: unknown): Promise<{ rows: CopiedIn[]; command: string }> {
    if (typeof data !== 'string') throw new TypeError('COPY FROM STDIN: the data must be one string');
    const stream: ReturnType<typeof copyFrom> = super.query(copyFrom(text));
    stream.end(data);
    // Settles once PostgreSQL has taken every row, or refused one (a constraint, a bad value).
    await finished(stream);
    return { rows: [{ copied: stream.rowCount }], command: 'COPY' };
  }

  /**
   * pg's own query_timeout only stops waiting: the connection stays stuck on the unanswered query
   * and goes back to the pool. Past the deadline this ends the connection, so the pool opens a new
   * one, and the caller gets a "store unavailable" error.
   */
  private withDeadline(
    pending: Promise<unknown>,
    ms: number,
    monitor: StoreMonitor,
    { operation, budget }: { operation: string | undefined; budget: RequestBudget | undefined },
  ): Promise<unknown> {
    const started = Date.now();
    return new Promise((resolve, reject) => {
      let settled = false;
      const settle = () => {
        settled = true;
        budget?.spend(Date.now() - started);
      };
      // Judged after the poll phase (`setImmediate`): an event loop kept busy past the deadline
      // runs its timers before it reads the answers that arrived meanwhile, and those are not a
      // late PostgreSQL.
      const timer = setTimeout(
        () =>
          setImmediate(() => {
            if (settled) return;
            settle();
            const error = new StoreUnavailableError(`PostgreSQL did not answer within ${ms} ms`);
            monitor.report(error, operation);
            reject(error);
            this.end().catch(() => {});
          }),
        ms,
      );
      pending.then(
        (value) => {
          clearTimeout(timer);
          if (settled) return;
          settle();
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          if (settled) return;
          settle();
          monitor.report(error, operation);
          reject(error);
        },
      );
    });
  }
}

/** The error of a request that has no budget left for the store. */
export function budgetSpent(): StoreUnavailableError {
  return new StoreUnavailableError(`the request's ${REQUEST_STORE_BUDGET_MS} ms for the store ran out`);
}

/**
 * A pooled connection, if one comes within what is left of `budget` (which the wait is counted
 * against); otherwise a "store unavailable" error, and the connection, should it come later, goes
 * straight back to the pool.
 */
export function checkoutWithin(pool: pg.Pool, budget: RequestBudget): Promise<pg.PoolClient> {
  const left = budget.leftMs;
  if (left <= 0) return Promise.reject(budgetSpent());
  const started = Date.now();
  return new Promise((resolve, reject) => {
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      budget.spend(Date.now() - started);
      reject(budgetSpent());
    }, left);
    pool.connect().then(
      (client) => {
        clearTimeout(timer);
        if (late) return client.release();
        budget.spend(Date.now() - started);
        resolve(client);
      },
      (error: unknown) => {
        clearTimeout(timer);
        if (late) return;
        budget.spend(Date.now() - started);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
