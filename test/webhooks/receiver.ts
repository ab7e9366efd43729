import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One POST a receiver got. */
export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  json: {
    type: string;
    timestamp: string;
    data: { id: string; object: unknown; seq: number | null; changed_at: string; cursor: string };
  };
  at: number;
  /** The path the request was made to (an endpoint's, when several share a receiver). */
  path: string;
}

/**
 * A real HTTP receiver on 127.0.0.1 for the webhook tests. `answer` decides each response (the
 * default is 204); every request is recorded, and so is every connection, so that a test can tell
 * that a refused delivery never connected.
 */
export class Receiver {
  readonly received: Received[] = [];
  /** Connections made to it, in all. */
  connections = 0;
  /** Connections open now, and the most open at once so far. */
  open = 0;
  maxOpen = 0;
  answer: (received: Received, response: ServerResponse) => void = (_r, response) => {
    response.statusCode = 204;
    response.end();
  };
  private readonly server: Server;
  private host = '127.0.0.1';
  private waiters: { count: number; resolve: () => void }[] = [];

  private constructor() {
    this.server = createServer((request, response) => {
      let body = '';
      request.setEncoding('utf8');
      request.on('data', (chunk: string) => {
        body += chunk;
      });
      request.on('end', () => {
        const received: Received = {
          headers: request.headers,
          body,
          json: JSON.parse(body === '' ? 'null' : body),
          at: Date.now(),
          path: request.url ?? '',
        };
        this.received.push(received);
        this.answer(received, response);
        this.waiters = this.waiters.filter((waiter) => {
          if (this.received.length < waiter.count) return true;
          waiter.resolve();
          return false;
        });
      });
    });
    this.server.on('connection', (socket) => {
      this.connections += 1;
      this.open += 1;
      this.maxOpen = Math.max(this.maxOpen, this.open);
      socket.on('close', () => {
        this.open -= 1;
      });
    });
  }

  /** A receiver listening on `host`: another loopback address (127.0.0.2, …) is another destination host. */
  static async start(host = '127.0.0.1'): Promise<Receiver> {
    const receiver = new Receiver();
    receiver.host = host;
    receiver.server.listen(0, host);
    await once(receiver.server, 'listening');
    return receiver;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  url(path = '/hook'): string {
    return `http://${this.host}:${this.port}${path}`;
  }

  /** Resolves once `count` requests in all have arrived; fails after `timeoutMs`. */
  waitFor(count: number, timeoutMs = 20_000): Promise<void> {
    if (this.received.length >= count) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(new Error(`receiver got ${this.received.length} of ${count} requests in ${timeoutMs} ms`)),
        timeoutMs,
      );
      this.waiters.push({
        count,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    this.server.close();
    await once(this.server, 'close').catch(() => {});
  }
}
