import { Socket } from 'node:net';
import { mock } from 'node:test';

/**
 * Keeps this process's event loop busy for `ms` right after its next write to a socket connected
 * to `port` (a Redis of the test's own) returns: the command is on its way and Redis answers at
 * once, but nothing is read until the loop is free again, as after a burst of requests or during an
 * import. Resolves with how long the loop was held.
 */
export function blockAfterNextWriteTo(port: number, ms: number): Promise<number> {
  const write = Socket.prototype.write;
  return new Promise((resolve) => {
    const spy = mock.method(
      Socket.prototype,
      'write',
      function (this: Socket, ...args: Parameters<Socket['write']>) {
        const written = write.apply(this, args);
        if (this.remotePort !== port) return written;
        spy.mock.restore();
        const started = performance.now();
        while (performance.now() - started < ms) {
          // Busy: synchronous work, no I/O read.
        }
        resolve(performance.now() - started);
        return written;
      },
    );
  });
}
