import type { CommitHandlers, CommitSignal, Store } from '../db/store.ts';

/**
 * How the deliveries hear that something was committed, so that an idle worker sleeps instead of
 * polling: the store's commit signal (`Store.commitSignal`: PostgreSQL's LISTEN, SQLite's commit
 * watch, or each lease tick for an in-memory database).
 */

export type { CommitHandlers, CommitSignal };

export interface CommitSignalOptions {
  /** The store the deliveries read. */
  store: Store;
  /** Where a connection of the signal's own goes (PostgreSQL's LISTEN). */
  databaseUrl: string;
}

/** The signal of the store `options` name, telling `on`. */
export function commitSignal(options: CommitSignalOptions, on: CommitHandlers): CommitSignal {
  return options.store.commitSignal(on, options.databaseUrl);
}
