import { readFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { PerformanceObserver } from 'node:perf_hooks';
import { mock } from 'node:test';

/**
 * Keeps this process's event loop busy for `ms` right after its next write to a socket connected
 * to `port` (a Redis of the test's own, a receiver in another process) returns: the command is on
 * its way and the other side answers at once, but nothing is read until the loop is free again, as
 * after a burst of requests or during an import. Resolves with how long the loop was held.
 * - `matching`: the first write for which it holds (by default, the next one).
 * - `flushed`: held from the next turn of the loop instead of inside the write, once a socket that
 *   was corked (undici writes a request's head and body together) has sent it.
 * - `alsoUntil`: held past `ms` until it holds too (looked at synchronously, for at most a minute).
 */
export function blockAfterNextWriteTo(
  port: number,
  ms: number,
  {
    matching = () => true,
    flushed = false,
    alsoUntil = () => true,
  }: { matching?: (data: unknown) => boolean; flushed?: boolean; alsoUntil?: () => boolean } = {},
): Promise<number> {
  const write = Socket.prototype.write;
  return new Promise((resolve) => {
    const hold = () => {
      const started = performance.now();
      while (performance.now() - started < ms || (!alsoUntil() && performance.now() - started < 60_000)) {
        // Busy: synchronous work, no I/O read.
      }
      resolve(performance.now() - started);
    };
    const spy = mock.method(
      Socket.prototype,
      'write',
      function (this: Socket, ...args: Parameters<Socket['write']>) {
        const written = write.apply(this, args);
        if (this.remotePort !== port || !matching(args[0])) return written;
        spy.mock.restore();
        if (flushed) setImmediate(hold);
        else hold();
        return written;
      },
    );
  });
}

/**
 * How long, in milliseconds, this process's main thread (the event loop's) has waited so far for a
 * CPU that other processes held (Linux's `/proc/self/schedstat`; 0 where there is none). On a busy
 * machine an answer can take that much longer than the process's own work and waits.
 */
export function cpuWaitMs(): number {
  try {
    return Number(readFileSync('/proc/self/schedstat', 'utf8').split(' ')[1]) / 1e6;
  } catch {
    return 0;
  }
}

/**
 * Watches this process's garbage collections, whose pauses hold the event loop up as well: how long
 * they paused it between two `performance.now()` readings. `stop` waits for the last ones, which
 * are reported after the turn of the loop they happened in.
 */
export function watchGarbageCollection() {
  const pauses: { from: number; to: number }[] = [];
  const record = (entries: PerformanceEntry[]) => {
    for (const entry of entries) pauses.push({ from: entry.startTime, to: entry.startTime + entry.duration });
  };
  const observer = new PerformanceObserver((list) => record(list.getEntries()));
  observer.observe({ entryTypes: ['gc'] });
  return {
    async stop(): Promise<void> {
      await new Promise((resolve) => setImmediate(resolve));
      record(observer.takeRecords());
      observer.disconnect();
    },
    pausedMs(from: number, to: number): number {
      return pauses.reduce(
        (sum, pause) => sum + Math.max(0, Math.min(pause.to, to) - Math.max(pause.from, from)),
        0,
      );
    },
  };
}
