/** Something that says when it is done with the bytes it was given: an HTTP response ('finish'). */
export interface Sent {
  once(event: 'finish', listener: () => void): unknown;
}

/** Buffers kept for later bodies: enough for a few responses at once, and none very large. */
const SPARE_BUFFERS = 4;
const LARGEST_KEPT_BYTES = 4 * 1024 * 1024;
const SMALLEST_BYTES = 64 * 1024;

const spare: Buffer[] = [];

/** Sizes in powers of two, so that a buffer fits the next body of about the same size. */
function capacityFor(length: number): number {
  let capacity = SMALLEST_BYTES;
  while (capacity < length) capacity *= 2;
  return capacity;
}

/**
 * A response body: the UTF-8 bytes of `pieces` (text, or bytes already UTF-8) one after another, without ever joining them into
 * one string, in a buffer that is used again for a later body once `response` has sent this one.
 *
 * Both halves are about fresh memory, which this machine pays for in page faults. V8 gives a
 * string above 128 KiB pages of its own (its large-object space), and a socket write of a string
 * copies it again; pieces of a few hundred bytes stay in the young generation, whose memory is
 * reused. A new buffer for each body is fresh memory too: glibc hands what is freed at the top of
 * its heap back to the system, and the next body faults it in again. For the changes feed's 500 KB
 * pages, those faults and copies cost more than serializing them (docs/performance.md).
 *
 * The body is the response's alone: nothing may keep it past 'finish' (a cache would copy it).
 */
export function utf8Body(response: Sent, pieces: readonly (string | Uint8Array)[]): Buffer {
  let length = 0;
  for (const piece of pieces) length += typeof piece === 'string' ? Buffer.byteLength(piece) : piece.length;
  const index = spare.findIndex((candidate) => candidate.length >= length);
  const [buffer = Buffer.allocUnsafeSlow(capacityFor(length))] = index === -1 ? [] : spare.splice(index, 1);
  let at = 0;
  for (const piece of pieces) {
    if (typeof piece === 'string') at += buffer.write(piece, at);
    else {
      buffer.set(piece, at);
      at += piece.length;
    }
  }
  // Every byte of the body is this body's: a used buffer holds another response's.
  if (at !== length) throw new Error(`utf8Body: wrote ${at} bytes of ${length}`);
  // Until then the socket may still be writing from it.
  response.once('finish', () => {
    if (spare.length < SPARE_BUFFERS && buffer.length <= LARGEST_KEPT_BYTES) spare.push(buffer);
  });
  return buffer.subarray(0, length);
}
