import { randomBytes, timingSafeEqual } from 'node:crypto';

/** Name of the hidden field that carries the CSRF token in every state-changing form. */
export const CSRF_FIELD = '_csrf';

export function newCsrfToken(): string {
  return randomBytes(32).toString('base64url');
}

/** Constant-time comparison, so the response time says nothing about how much of a guess was right. */
export function csrfTokenMatches(expected: string | undefined, given: string): boolean {
  if (expected === undefined || expected === '' || given === '') return false;
  const a = Buffer.from(expected);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}
