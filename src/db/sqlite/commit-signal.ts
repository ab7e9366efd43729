import type { CommitHandlers, CommitSignal } from '../store.ts';
import type { CommitWatch } from './commit-watch.ts';

/**
 * SQLite's commit signal (`Store.commitSignal`): in WAL mode the commit watch, one 48-byte read of
 * the WAL index every COMMIT_WATCH_MS; in memory, no signal (every lease tick counts as a commit).
 */

/** How often SQLite's commit watch is looked at: a 48-byte read, no SQL. */
const COMMIT_WATCH_MS = 100;

/** The commit watch, looked at every COMMIT_WATCH_MS. */
export class Watcher implements CommitSignal {
  readonly everyTick = false;
  private timer: NodeJS.Timeout | null = null;
  private last = -1;
  private readonly watch: CommitWatch;
  private readonly on: CommitHandlers;

  constructor(watch: CommitWatch, on: CommitHandlers) {
    this.watch = watch;
    this.on = on;
  }

  start(): Promise<void> {
    this.timer = setInterval(() => {
      // current() never rejects, and nothing in the callback throws.
      void this.watch.current().then((generation) => {
        if (generation === this.last) return;
        this.last = generation;
        this.on.anything();
      });
    }, COMMIT_WATCH_MS);
    return Promise.resolve();
  }

  stop(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    return Promise.resolve();
  }
}

/** An in-memory database: no other process writes it, and no watch to look at. */
export const EVERY_TICK: CommitSignal = {
  everyTick: true,
  start: () => Promise.resolve(),
  stop: () => Promise.resolve(),
};
