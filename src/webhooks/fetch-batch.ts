import type { Kysely } from 'kysely';
import { type LeasedEndpointRow, webhookRepository } from '../db/repositories/webhooks.ts';
import type { Database } from '../db/schema.ts';
import type { CursorIssuer } from './attempt.ts';
import type { EventChange } from './payload.ts';

/**
 * The fetch of a batch: the changes after the endpoint's position, in feed order, and what the
 * receiver already knows of their records, which decides each event's type (`created` or `updated`).
 *
 * What the endpoint knows is a floor, `known_through` (every record that entered the view up to it
 * is known), and the records acknowledged after it (`webhook_acknowledged`): a record is known if it
 * entered the view at or before the floor, or was acknowledged since it last entered the view (the
 * same `created_seq`).
 */

/**
 * The changes feed as deliveries read it (`ChangeFeedService`, handed in by the composition root,
 * src/runtime.ts: the worker sits below the services).
 */
export interface DeliveryFeed {
  /** The first `limit` changes after `after`, each upsert with the seq its record entered the view at, and the head. */
  after(accountId: string, after: number, limit: number): Promise<{ head: number; changes: EventChange[] }>;
  /** The codec of the feed's cursors. */
  cursors(): Promise<CursorIssuer>;
}

/** What `webhook_acknowledged` holds for the endpoint, as far as its worker knows. */
export type StoredAcknowledged = 'unknown' | 'empty' | 'held';

/** What the receiver knows of a batch's records. */
export interface Known {
  /** `known_through`: every record that entered the view up to this seq is known. */
  floor: number;
  /** Records acknowledged past the floor, by `recordKey`, with the seq they entered the view at. */
  acknowledged: ReadonlyMap<string, number>;
}

export interface Batch {
  changes: EventChange[];
  /** The account's feed head the read saw. */
  head: number;
  /** The read held every change up to the head it read (it was not cut at the batch size). */
  complete: boolean;
  /** The feed is read again after this batch: the read was cut at the size, or its last change is before the head. */
  more: boolean;
  known: Known;
}

export const recordKey = (type: string, id: string) => `${type}:${id}`;

/** Whether the receiver knows the record of an upsert in its current life. */
export function knows({ floor, acknowledged }: Known, change: EventChange): boolean {
  return (
    change.createdSeq <= floor || acknowledged.get(recordKey(change.type, change.id)) === change.createdSeq
  );
}

/**
 * Reads up to `size` changes after the endpoint's position and, unless `stored` says the endpoint
 * holds none, what it acknowledged of their records (one read).
 */
export async function fetchBatch(
  db: Kysely<Database>,
  feed: DeliveryFeed,
  row: Pick<LeasedEndpointRow, 'id' | 'account_id' | 'position' | 'known_through'>,
  size: number,
  stored: StoredAcknowledged,
): Promise<Batch> {
  const { head, changes } = await feed.after(row.account_id, row.position, size);
  const complete = changes.length < size;
  const more = changes.length > 0 && (!complete || (changes.at(-1)?.seq ?? 0) < head);
  const acknowledged = new Map<string, number>();
  if (changes.length > 0 && stored !== 'empty') {
    const ids = [...new Set(changes.map((change) => change.id))];
    for (const record of await webhookRepository.acknowledged(db, row.id, ids))
      acknowledged.set(recordKey(record.record_type, record.record_id), record.created_seq);
  }
  return { changes, head, complete, more, known: { floor: row.known_through, acknowledged } };
}
