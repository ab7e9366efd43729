/** What an entry costs beyond its key and value: its slot in the map and the object holding it. */
export const ENTRY_OVERHEAD_BYTES = 64;

/**
 * An estimate of a flat record's bytes, for a size function: its strings' characters at two bytes
 * (V8 may store them in one), a slot per field and the object.
 */
export function recordBytes(record: Readonly<Record<string, unknown>>): number {
  let bytes = ENTRY_OVERHEAD_BYTES;
  for (const value of Object.values(record)) bytes += 16 + (typeof value === 'string' ? value.length * 2 : 0);
  return bytes;
}

/**
 * A map that keeps the most recently used entries within a bound. The bound is on the sum of the
 * entries' sizes: by default every entry counts 1, so it bounds their number; a size function bounds
 * something else, such as the bytes of cached bodies. Both a read and a write make an entry the most
 * recently used; the least recently used go first once the sum exceeds the bound.
 */
export class Lru<K, V> {
  // Map iteration follows insertion order: re-inserting an entry makes it the newest, so the first
  // entry is always the least recently used.
  private readonly entries = new Map<K, { value: V; size: number }>();
  private total = 0;
  /** The newest entry's key: reading that entry again changes no order, so it is not moved. */
  private newest: K | undefined;

  private readonly maxSize: number;
  private readonly sizeOf: (value: V, key: K) => number;

  constructor(maxSize: number, sizeOf: (value: V, key: K) => number = () => 1) {
    this.maxSize = maxSize;
    this.sizeOf = sizeOf;
  }

  /** The sum of the entries' sizes. */
  get size(): number {
    return this.total;
  }

  get(key: K): V | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    if (key !== this.newest) {
      this.entries.delete(key);
      this.entries.set(key, entry);
      this.newest = key;
    }
    return entry.value;
  }

  /**
   * Stores `value` as the newest entry. One larger than the whole bound is not kept at all (and
   * the key's previous value is dropped: it is no longer current).
   */
  set(key: K, value: V): void {
    this.delete(key);
    const size = this.sizeOf(value, key);
    if (size > this.maxSize) return;
    this.entries.set(key, { value, size });
    this.newest = key;
    this.total += size;
    for (const [oldestKey, oldest] of this.entries) {
      if (this.total <= this.maxSize) break;
      this.entries.delete(oldestKey);
      this.total -= oldest.size;
    }
  }

  delete(key: K): void {
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    this.entries.delete(key);
    this.total -= entry.size;
  }

  clear(): void {
    this.entries.clear();
    this.newest = undefined;
    this.total = 0;
  }
}
