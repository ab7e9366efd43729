import assert from 'node:assert/strict';
import { test } from 'node:test';
import { wholeNumber } from '../../src/lib/whole-number.ts';

test('digits only, however many, capped at 2^53 − 1; anything else is no number', () => {
  const cases: [unknown, number | null][] = [
    ['0', 0],
    ['007', 7],
    ['9007199254740990', 9007199254740990],
    ['9007199254740993', Number.MAX_SAFE_INTEGER],
    ['9'.repeat(400), Number.MAX_SAFE_INTEGER],
    ['', null],
    ['-1', null],
    ['+1', null],
    ['1.5', null],
    ['1e3', null],
    [' 1', null],
    ['0x10', null],
    ['١٢', null],
    [['1', '2'], null],
    [undefined, null],
    [5, null],
  ];
  for (const [value, expected] of cases) assert.equal(wholeNumber(value), expected, JSON.stringify(value));
});
