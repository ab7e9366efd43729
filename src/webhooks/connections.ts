import type { Client, Dispatcher } from 'undici';

/**
 * The outbound connections of webhook deliveries: a pool per destination (origin), with a cap on
 * the connections open to all destinations together.
 *
 * A `Connection` is one undici Client (one socket at a time) carrying one request at a time, so a
 * request that holds a connection is written at once, and the time it waits for one is spent here,
 * where the caller can tell it apart from the receiver's time (outbound.ts). A request takes:
 *
 * 1. an idle connection of its destination (the most recently used: its socket is the likeliest
 *    to be still open);
 * 2. else a new one, if its destination has fewer than `perOrigin` and all destinations fewer than
 *    `max`: when `max` is reached by connections that sit idle, the one idle longest (of another
 *    destination) is closed to make room, so idle keep-alive sockets never keep a request waiting;
 * 3. else it waits, in order of arrival, until one is released or made room for, or its signal
 *    ends the wait.
 *
 * An idle connection whose socket closes (the keep-alive timeout, or the receiver) is dropped.
 */

export interface ConnectionLimits {
  /** Connections open at once, to all destinations. */
  max: number;
  /** Connections open at once to one destination. */
  perOrigin: number;
}

export class Connection {
  /** Whether its socket is open now. */
  connected = false;
  /** Where its (first or next) connection stands: for the reason given when it takes too long. */
  stage: 'lookup' | 'connect' = 'lookup';
  /**
   * Told, by the request's owner, when its request has the connection: undici calls
   * `onRequestStart` just before writing the request on a connected socket. False means it aborted
   * the request (through `controller`), which is then never written.
   */
  onStart: ((controller: Dispatcher.DispatchController) => boolean) | null = null;
  /** The client, with `onStart` told of each request it writes. */
  readonly dispatcher: Dispatcher;
  readonly origin: string;
  readonly client: Client;

  constructor(origin: string, client: Client) {
    this.origin = origin;
    this.client = client;
    this.dispatcher = client.compose(
      (dispatch) => (options, handler) =>
        dispatch(options, {
          onRequestStart: (controller, context) => {
            if (this.onStart?.(controller) ?? true) handler.onRequestStart?.(controller, context);
          },
          onRequestUpgrade: (controller, statusCode, headers, socket) =>
            handler.onRequestUpgrade?.(controller, statusCode, headers, socket),
          onResponseStart: (controller, statusCode, headers, statusMessage) =>
            handler.onResponseStart?.(controller, statusCode, headers, statusMessage),
          onResponseData: (controller, chunk) => handler.onResponseData?.(controller, chunk),
          onResponseEnd: (controller, trailers) => handler.onResponseEnd?.(controller, trailers),
          onResponseError: (controller, error) => handler.onResponseError?.(controller, error),
        }),
    );
  }
}

interface Waiter {
  origin: string;
  take(connection: Connection): void;
  fail(error: Error): void;
}

interface Destination {
  open: number;
  /** Released connections, least recently used first. */
  idle: Connection[];
}

export class ConnectionPools {
  private open = 0;
  private readonly destinations = new Map<string, Destination>();
  /** Every idle connection, idle longest first (a Set keeps insertion order). */
  private readonly idle = new Set<Connection>();
  private readonly all = new Set<Connection>();
  private waiters: Waiter[] = [];
  private closed = false;
  private readonly limits: ConnectionLimits;
  /** A new Client for `origin`; its connector tells `stage` where connecting stands. */
  private readonly newClient: (origin: string, stage: (stage: Connection['stage']) => void) => Client;

  constructor(
    limits: ConnectionLimits,
    newClient: (origin: string, stage: (stage: Connection['stage']) => void) => Client,
  ) {
    this.limits = limits;
    this.newClient = newClient;
  }

  /** Connections open now, to all destinations. */
  get size(): number {
    return this.open;
  }

  /** A connection to `origin`, now or when one frees up; rejects with the signal's reason if it ends first. */
  acquire(origin: string, signal: AbortSignal): Promise<Connection> {
    if (this.closed) return Promise.reject(new Error('the outbound client is closed'));
    if (signal.aborted) return Promise.reject(signal.reason);
    // Ahead of the waiters only when none of them could take what this takes.
    const ready = this.waiters.length === 0 ? this.take(origin) : null;
    if (ready !== null) return Promise.resolve(ready);
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        origin,
        take: (connection) => {
          signal.removeEventListener('abort', giveUp);
          resolve(connection);
        },
        fail: (error) => {
          signal.removeEventListener('abort', giveUp);
          reject(error);
        },
      };
      const giveUp = () => {
        this.waiters = this.waiters.filter((other) => other !== waiter);
        reject(signal.reason);
      };
      signal.addEventListener('abort', giveUp, { once: true });
      this.waiters.push(waiter);
      this.serve();
    });
  }

  /**
   * Gives `connection` back after its request: kept for the next request if `reusable` and its
   * socket is open, closed otherwise (a failed or abandoned request leaves a socket in no known state).
   */
  release(connection: Connection, reusable: boolean): void {
    if (!reusable || !connection.connected || this.closed) this.drop(connection);
    else {
      this.destinations.get(connection.origin)?.idle.push(connection);
      this.idle.add(connection);
    }
    this.serve();
  }

  /** Ends the waits, closes idle connections, and lets those in use finish their request. */
  async close(): Promise<void> {
    this.closed = true;
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) waiter.fail(new Error('the outbound client is closed'));
    await Promise.all([...this.all].map((connection) => connection.client.close().catch(() => {})));
  }

  /** A connection for `origin` if one can be had now (steps 1 and 2 above), else null. */
  private take(origin: string): Connection | null {
    const destination = this.destinations.get(origin);
    const reused = destination?.idle.pop();
    if (reused !== undefined) {
      this.idle.delete(reused);
      return reused;
    }
    if ((destination?.open ?? 0) >= this.limits.perOrigin) return null;
    if (this.open >= this.limits.max) {
      const longestIdle = this.idle.values().next();
      if (longestIdle.done === true) return null;
      this.drop(longestIdle.value);
    }
    return this.connect(origin);
  }

  private connect(origin: string): Connection {
    let destination = this.destinations.get(origin);
    if (destination === undefined) {
      destination = { open: 0, idle: [] };
      this.destinations.set(origin, destination);
    }
    // The connector tells where connecting stands only once a request is dispatched: after this.
    const client = this.newClient(origin, (stage) => {
      connection.stage = stage;
    });
    const connection = new Connection(origin, client);
    client.on('connect', () => {
      connection.connected = true;
    });
    client.on('disconnect', () => {
      connection.connected = false;
      // Idle and closed (keep-alive timeout, or the receiver): it makes room.
      if (this.idle.has(connection)) {
        this.drop(connection);
        this.serve();
      }
    });
    client.on('connectionError', () => {
      connection.connected = false;
    });
    destination.open += 1;
    this.open += 1;
    this.all.add(connection);
    return connection;
  }

  /** Closes `connection` and gives its place back. */
  private drop(connection: Connection): void {
    if (!this.all.delete(connection)) return;
    this.idle.delete(connection);
    const destination = this.destinations.get(connection.origin);
    if (destination !== undefined) {
      destination.idle = destination.idle.filter((other) => other !== connection);
      destination.open -= 1;
      if (destination.open === 0) this.destinations.delete(connection.origin);
    }
    this.open -= 1;
    connection.client.destroy().catch(() => {});
  }

  /** Gives waiters, in order of arrival, what can be had now. */
  private serve(): void {
    if (this.waiters.length === 0) return;
    const still: Waiter[] = [];
    for (const waiter of this.waiters) {
      const connection = this.take(waiter.origin);
      if (connection === null) still.push(waiter);
      else waiter.take(connection);
    }
    this.waiters = still;
  }
}
