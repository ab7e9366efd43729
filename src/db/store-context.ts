import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * What the store's drivers know of the work a statement belongs to, without it being passed
 * down every call: the deadline of the request being served, and the repository operation that
 * issued the statement. Both ride on AsyncLocalStorage, so a statement sees them however many
 * awaits lie between the route, the repository and the driver.
 */

/**
 * One budget for the store per request: every connection checkout, statement and lock wait of
 * the request draws on it, so a request that needs several (the key row, then the page) still
 * gets its 503 after about REQUEST_STORE_BUDGET_MS of waiting for the store in all, not that long
 * per checkout. Only time spent waiting for the store counts: a request's own work in between (a
 * password's hash on a busy machine) does not use up the store's share.
 */
export const REQUEST_STORE_BUDGET_MS = 2500;

/** A request's budget for the store (`newRequestBudget`). */
export class RequestBudget {
  private spentMs = 0;
  private ended = false;

  private readonly budgetMs: number;

  constructor(budgetMs: number) {
    this.budgetMs = budgetMs;
  }

  /** What is left of it, in ms (0 or less: spent). */
  get leftMs(): number {
    return this.budgetMs - this.spentMs;
  }

  /** Counts `ms` of waiting for the store against it. */
  spend(ms: number): void {
    this.spentMs += ms;
  }

  /**
   * Ends the budget once the request's answer is decided: what still reads the store for it (an
   * export streaming from its snapshot) or was started by it and runs on has the limits of work
   * outside a request, per call.
   */
  end(): void {
    this.ended = true;
  }

  get active(): boolean {
    return !this.ended;
  }
}

const budgets = new AsyncLocalStorage<RequestBudget>();
const operations = new AsyncLocalStorage<string>();

/** The budget of a request that arrives now. */
export function newRequestBudget(budgetMs = REQUEST_STORE_BUDGET_MS): RequestBudget {
  return new RequestBudget(budgetMs);
}

/**
 * Runs `serve` (the rest of a request's handling) under `budget`. Called again where the handling
 * resumes from an event the request's context did not reach (its body read from the socket).
 */
export function runInBudget(budget: RequestBudget, serve: () => void): void {
  budgets.run(budget, serve);
}

/**
 * The budget of the request being served, which the current store call draws on; undefined
 * outside a request, or once its answer is decided (`RequestBudget.end`): the call then has the
 * store's per-call deadline.
 */
export function requestBudget(): RequestBudget | undefined {
  const budget = budgets.getStore();
  return budget?.active === true ? budget : undefined;
}

/** Runs `work` outside any request's budget: for timers and loops a request merely set going. */
export function outsideRequest<T>(work: () => T): T {
  return budgets.exit(work);
}

/** The repository operation (`incidentRepository.page`) the current statement was issued by. */
export function currentOperation(): string | undefined {
  return operations.getStore();
}

/**
 * A repository whose every method runs under its name (`<name>.<method>`), so that a statement
 * that times out or fails for want of the store is named in the log by what issued it, never by
 * its parameters.
 */
export function repository<Methods extends Record<string, (...args: never[]) => unknown>>(
  name: string,
  methods: Methods,
): Methods {
  const named: Record<string, unknown> = {};
  for (const [key, method] of Object.entries(methods)) {
    const operation = `${name}.${key}`;
    named[key] = (...args: never[]) => operations.run(operation, method, ...args);
  }
  // Each method was replaced by one taking the same arguments and answering the same result.
  return named as Methods;
}
