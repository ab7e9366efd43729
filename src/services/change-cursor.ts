import { createHmac, createSecretKey, type KeyObject, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { keptSecret } from './generated-secrets.ts';

/**
 * Cursors of the changes feed: opaque to clients, tamper-evident and bound to one account.
 *
 * A cursor holds where its holder stands in the feed (`position`: every change up to this seq has
 * been delivered), the end of the pass it belongs to (`bound`: the head when the pass began, so
 * that a record changed during a walk is delivered in the next pass, never twice in one), and
 * when it was issued. Those 17 bytes are followed by an HMAC-SHA256 (first 16 bytes) over the
 * account id and the bytes, with a key generated once and kept in the database, and the whole is
 * base64url: a changed byte, or another account's cursor, fails the check.
 */

export interface FeedPosition {
  /** Seq of the last change delivered (0: none yet). */
  position: number;
  /** The head when this pass began: the pass delivers changes up to it. */
  bound: number;
  /** When the cursor was issued, in Unix seconds. */
  issuedAt: number;
}

const VERSION = 1;
const PAYLOAD_BYTES = 1 + 6 + 6 + 4;
const MAC_BYTES = 16;
/** Seqs fit in 6 bytes (2^48: 280 trillion changes). */
const MAX_SEQ = 2 ** 48 - 1;

export class ChangeCursors {
  /** A KeyObject, not the bytes: createHmac prepares a Buffer key anew at every call, at 6 times the cost. */
  private readonly key: KeyObject;

  constructor(key: Buffer) {
    this.key = createSecretKey(key);
  }

  encode(accountId: string, { position, bound, issuedAt }: FeedPosition): string {
    if (position > MAX_SEQ || bound > MAX_SEQ) throw new Error('changes cursor: seq beyond 2^48');
    const payload = Buffer.alloc(PAYLOAD_BYTES);
    payload.writeUInt8(VERSION, 0);
    payload.writeUIntBE(position, 1, 6);
    payload.writeUIntBE(bound, 7, 6);
    payload.writeUInt32BE(issuedAt, 13);
    return Buffer.concat([payload, this.mac(accountId, payload)]).toString('base64url');
  }

  /** The position a cursor of this account holds; null for anything else (garbled, forged, another account's). */
  decode(accountId: string, cursor: string): FeedPosition | null {
    if (!/^[A-Za-z0-9_-]{1,100}$/.test(cursor)) return null;
    const bytes = Buffer.from(cursor, 'base64url');
    if (bytes.length !== PAYLOAD_BYTES + MAC_BYTES || bytes.toString('base64url') !== cursor) return null;
    const payload = bytes.subarray(0, PAYLOAD_BYTES);
    if (!timingSafeEqual(bytes.subarray(PAYLOAD_BYTES), this.mac(accountId, payload))) return null;
    if (payload.readUInt8(0) !== VERSION) return null;
    const position = payload.readUIntBE(1, 6);
    const bound = payload.readUIntBE(7, 6);
    if (position > bound) return null;
    return { position, bound, issuedAt: payload.readUInt32BE(13) };
  }

  private mac(accountId: string, payload: Buffer): Buffer {
    return createHmac('sha256', this.key)
      .update(`changes-cursor\0${accountId}\0`)
      .update(payload)
      .digest()
      .subarray(0, MAC_BYTES);
  }
}

/** The cursor codec of this database's key, loaded (or generated) at the first call and kept. */
export function changeCursorsOf(db: Kysely<Database>): () => Promise<ChangeCursors> {
  return keptSecret(
    db,
    'changes_cursor',
    () => randomBytes(32).toString('base64url'),
    (key) => new ChangeCursors(Buffer.from(key, 'base64url')),
  );
}
