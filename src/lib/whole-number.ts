/**
 * A query parameter read as a whole number: decimal digits only, however many (the request line's
 * limit bounds them), past 2^53 − 1 that largest exact number. Null for anything else (a sign, a
 * point, an exponent, a repeated parameter's array, nothing).
 */
export function wholeNumber(value: unknown): number | null {
  if (typeof value !== 'string' || !/^\d+$/.test(value)) return null;
  return Math.min(Number(value), Number.MAX_SAFE_INTEGER);
}
