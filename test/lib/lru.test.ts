import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Lru } from '../../src/lib/lru.ts';

function keysOf<V>(lru: Lru<string, V>, candidates: string[]): string[] {
  // The keys still present, in the order given (reading them refreshes them, which the tests allow for).
  return candidates.filter((key) => lru.get(key) !== undefined);
}

describe('Lru', () => {
  it('keeps at most maxSize entries, dropping the least recently used first', () => {
    const lru = new Lru<string, number>(3);
    lru.set('a', 1);
    lru.set('b', 2);
    lru.set('c', 3);
    assert.equal(lru.get('a'), 1); // a is now the newest; b the oldest
    lru.set('d', 4);
    assert.equal(lru.size, 3);
    assert.equal(lru.get('b'), undefined);
    assert.deepEqual(keysOf(lru, ['a', 'b', 'c', 'd']), ['a', 'c', 'd']);
  });

  it('reading the newest entry again and again keeps the order exact', () => {
    const lru = new Lru<string, number>(2);
    lru.set('a', 1);
    lru.set('b', 2);
    assert.equal(lru.get('b'), 2); // already the newest
    assert.equal(lru.get('b'), 2);
    assert.equal(lru.get('a'), 1); // now a is the newest, b the oldest
    lru.set('c', 3);
    assert.equal(lru.get('b'), undefined);
    assert.equal(lru.get('c'), 3);

    // The newest entry deleted, then written again: it is the newest once more.
    lru.delete('c');
    lru.set('c', 30);
    assert.equal(lru.get('a'), 1);
    lru.set('d', 4);
    assert.equal(lru.get('c'), undefined);
    assert.deepEqual(keysOf(lru, ['a', 'c', 'd']), ['a', 'd']);

    lru.clear();
    lru.set('e', 5);
    lru.set('f', 6);
    assert.equal(lru.get('e'), 5);
    lru.set('g', 7);
    assert.equal(lru.get('f'), undefined);
  });

  it('a write refreshes an entry and replaces its value without growing', () => {
    const lru = new Lru<string, number>(2);
    lru.set('a', 1);
    lru.set('b', 2);
    lru.set('a', 10);
    lru.set('c', 3);
    assert.equal(lru.size, 2);
    assert.equal(lru.get('a'), 10);
    assert.equal(lru.get('b'), undefined);
    assert.equal(lru.get('c'), 3);
  });

  it('delete removes an entry and frees its size; deleting a missing key is a no-op', () => {
    const lru = new Lru<string, number>(2);
    lru.set('a', 1);
    lru.delete('a');
    lru.delete('missing');
    assert.equal(lru.get('a'), undefined);
    assert.equal(lru.size, 0);
    lru.set('b', 2);
    lru.set('c', 3);
    assert.deepEqual(keysOf(lru, ['b', 'c']), ['b', 'c']);
  });

  it('bounds the sum of sizes given by a size function, evicting as many entries as needed', () => {
    const lru = new Lru<string, Buffer>(100, (body, key) => body.length + key.length);
    lru.set('a', Buffer.alloc(39)); // 40
    lru.set('b', Buffer.alloc(39)); // 80
    lru.set('c', Buffer.alloc(9)); // 90
    assert.equal(lru.size, 90);
    lru.set('d', Buffer.alloc(69)); // 160: a and b must go, c stays
    assert.equal(lru.size, 80);
    assert.deepEqual(keysOf(lru, ['a', 'b', 'c', 'd']), ['c', 'd']);
  });

  it('replacing a value re-measures it', () => {
    const lru = new Lru<string, string>(10, (value) => value.length);
    lru.set('a', 'xxxxxx');
    lru.set('a', 'xx');
    assert.equal(lru.size, 2);
    lru.set('b', 'xxxxxxxx');
    assert.equal(lru.size, 10);
    assert.equal(lru.get('a'), 'xx');
  });

  it('an entry larger than the whole bound is not kept, and evicts nothing', () => {
    const lru = new Lru<string, string>(5, (value) => value.length);
    lru.set('a', 'xx');
    lru.set('big', 'xxxxxx');
    assert.equal(lru.get('big'), undefined);
    assert.equal(lru.get('a'), 'xx');
    assert.equal(lru.size, 2);
  });
});
