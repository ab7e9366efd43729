import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InputError } from '../../src/errors.ts';
import { storableText } from '../../src/services/input-text.ts';

test('text a store cannot keep is an InputError naming the field; other text passes unchanged', () => {
  assert.equal(storableText('name', 'smile 😀'), 'smile 😀');
  assert.throws(
    () => storableText('name', 'a\u0000b'),
    (error) =>
      error instanceof InputError && error.message === 'name must not contain the NUL character (\\u0000)',
  );
  assert.throws(
    () => storableText('description', '\ud800'),
    (error) =>
      error instanceof InputError &&
      error.message === 'description must be valid Unicode: it holds a lone surrogate (\\ud800–\\udfff)',
  );
});
