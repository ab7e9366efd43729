/**
 * Text that both stores keep as it is, for every field a person or a client sends. PostgreSQL's
 * `text` holds no NUL character (U+0000): a query that so much as binds one fails (SQLSTATE
 * 22021), a lookup included, where SQLite would store it. Half of a UTF-16 surrogate pair (JSON's
 * `\ud800` alone) has no UTF-8 form: either store would keep U+FFFD in its place.
 */

/** What keeps `text` from being stored as it is, to follow the field's name; null if nothing does. */
export function storageProblem(text: string): string | null {
  if (text.includes('\0')) return 'must not contain the NUL character (\\u0000)';
  if (!text.isWellFormed()) return 'must be valid Unicode: it holds a lone surrogate (\\ud800–\\udfff)';
  return null;
}

/**
 * Whether `text` can be stored as it is. A lookup by text that cannot finds nothing, without a
 * query: no row holds it, and PostgreSQL would refuse the query instead of answering.
 */
export function isStorableText(text: string): boolean {
  return storageProblem(text) === null;
}
