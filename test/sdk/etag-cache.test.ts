import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MemoryEtagCache } from '../../packages/sdk/src/index.ts';

/** The in-memory cache of `etagCache: true`: bounded by bytes, the least recently used answers out first. */

const answer = (etag: string, body: string) => ({ etag, body });
/** The bytes an answer takes: its URL, ETag and body in UTF-8. */
const size = (url: string, etag: string, body: string) =>
  Buffer.byteLength(url) + Buffer.byteLength(etag) + Buffer.byteLength(body);

describe('MemoryEtagCache', () => {
  test('keeps answers by URL and hands back copies; a new answer replaces the old one', () => {
    const cache = new MemoryEtagCache();
    assert.equal(cache.get('https://x.example/a'), undefined);
    cache.set('https://x.example/a', answer('"1"', '{"data":1}'));
    const kept = cache.get('https://x.example/a');
    assert.deepEqual(kept, answer('"1"', '{"data":1}'));
    kept!.body = 'changed by the caller';
    assert.deepEqual(cache.get('https://x.example/a'), answer('"1"', '{"data":1}'));
    cache.set('https://x.example/a', answer('"2"', '{"data":"Åsa"}'));
    assert.deepEqual(cache.get('https://x.example/a'), answer('"2"', '{"data":"Åsa"}'));
    assert.equal(cache.bytes, size('https://x.example/a', '"2"', '{"data":"Åsa"}'));
  });

  test('past maxBytes the least recently used answers go; one larger than the whole is not kept', () => {
    const one = size('u1', '"e"', 'x'.repeat(10));
    const cache = new MemoryEtagCache({ maxBytes: one * 2 });
    cache.set('u1', answer('"e"', 'x'.repeat(10)));
    cache.set('u2', answer('"e"', 'x'.repeat(10)));
    // Read: u1 is now the more recently used.
    assert.ok(cache.get('u1') !== undefined);
    cache.set('u3', answer('"e"', 'x'.repeat(10)));
    assert.equal(cache.get('u2'), undefined);
    assert.ok(cache.get('u1') !== undefined);
    assert.ok(cache.get('u3') !== undefined);
    assert.equal(cache.bytes, one * 2);

    cache.set('u4', answer('"e"', 'x'.repeat(one * 2)));
    assert.equal(cache.get('u4'), undefined);
    assert.equal(cache.bytes, one * 2, 'the others stay');
    assert.throws(() => new MemoryEtagCache({ maxBytes: -1 }), /maxBytes must be a whole number of bytes/);
  });
});
