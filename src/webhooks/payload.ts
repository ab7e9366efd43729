import { TEST_EVENT_TYPE } from './events.ts';

/**
 * The body of a webhook event (docs/design.md, "Webhooks"): `{ type, timestamp, data: { id, object, seq,
 * changed_at, cursor } }`, `object` as the list endpoints render the record (null on a deletion),
 * `cursor` a `/changes` cursor just after this event.
 */

/** What a change's event is made of (a change of the feed, with when its record entered the view). */
export interface EventChange {
  seq: number;
  type: string;
  op: 'upsert' | 'delete';
  id: string;
  object: unknown;
  changed_at: string;
  /** The seq at which the record entered the public view (upserts). */
  createdSeq: number;
}

/**
 * `<type>.created|updated|deleted` of a change for a receiver that `knows` the record or not: knows
 * it when it was sent a `created` or `updated` of it since the record last entered the view
 * (`fetch-batch.ts` reads that per endpoint, `record-outcome.ts` writes it).
 */
export function eventType(change: EventChange, knows: boolean): string {
  if (change.op === 'delete') return `${change.type}.deleted`;
  return `${change.type}.${knows ? 'updated' : 'created'}`;
}

/** The JSON body of a change's event. `timestamp` is when the change was made. */
export function changeEventBody(type: string, change: EventChange, cursor: string): string {
  return JSON.stringify({
    type,
    timestamp: change.changed_at,
    data: { id: change.id, object: change.object, seq: change.seq, changed_at: change.changed_at, cursor },
  });
}

/**
 * The body of a test event: `data.id` is the endpoint's, no object, no seq, and the cursor of the
 * feed's head at the moment of the test.
 */
export function testEventBody(endpointId: string, now: string, cursor: string): string {
  return JSON.stringify({
    type: TEST_EVENT_TYPE,
    timestamp: now,
    data: { id: endpointId, object: null, seq: null, changed_at: now, cursor },
  });
}
