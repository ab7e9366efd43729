import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { describe, it } from 'node:test';
import { utf8Body } from '../../src/lib/utf8.ts';

describe('utf8Body', () => {
  it('is the UTF-8 of the pieces one after another, characters of any width included', () => {
    const pieces = ['{"a":', '"é 💥 \u2028"', '', ',"b":[1,2]}', 'x'.repeat(70_000)];
    const body = utf8Body(new EventEmitter(), pieces);
    assert.deepEqual(body, Buffer.from(pieces.join(''), 'utf8'));
  });

  it('takes bytes already UTF-8 as they are, between text', () => {
    const bytes = Buffer.from('{"c":"ü 💥"}');
    const body = utf8Body(new EventEmitter(), ['[', bytes, ',', new Uint8Array(bytes), ']']);
    assert.equal(body.toString('utf8'), '[{"c":"ü 💥"},{"c":"ü 💥"}]');
  });

  it('uses a buffer again only after its response has sent it, and never shows what it held before', () => {
    const first = new EventEmitter();
    const sent = utf8Body(first, ['first body, the longer one']);
    const during = utf8Body(new EventEmitter(), ['second']);
    assert.notEqual(during.buffer, sent.buffer, 'not while the first response may still be writing');
    assert.equal(sent.toString(), 'first body, the longer one');

    first.emit('finish');
    const after = utf8Body(new EventEmitter(), ['third']);
    assert.equal(after.buffer, sent.buffer, 'used again once sent');
    assert.equal(after.toString(), 'third');
    assert.equal(after.length, 5);
  });
});
