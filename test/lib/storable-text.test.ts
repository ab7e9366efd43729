import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { isStorableText, storageProblem } from '../../src/lib/storable-text.ts';

describe('text both stores keep as it is', () => {
  test('any well-formed text without NUL is kept, pairs of surrogates (emoji) included', () => {
    for (const text of ['', 'Power BI', 'naïve ünïcode ✓', 'smile 😀', '\u0001\t\n']) {
      assert.equal(storageProblem(text), null, JSON.stringify(text));
      assert.equal(isStorableText(text), true);
    }
  });

  test('a NUL character or half of a surrogate pair is named', () => {
    const cases: [string, string][] = [
      ['a\u0000b', 'must not contain the NUL character (\\u0000)'],
      ['\u0000', 'must not contain the NUL character (\\u0000)'],
      ['a\ud800b', 'must be valid Unicode: it holds a lone surrogate (\\ud800–\\udfff)'],
      ['\udfff', 'must be valid Unicode: it holds a lone surrogate (\\ud800–\\udfff)'],
    ];
    for (const [text, problem] of cases) {
      assert.equal(storageProblem(text), problem, JSON.stringify(text));
      assert.equal(isStorableText(text), false);
    }
  });
});
