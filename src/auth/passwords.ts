import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

/**
 * Passwords are stored as `scrypt$N$r$p$salt$hash` (base64url), so the cost can be raised later
 * without invalidating stored hashes: a hash of a lower cost still verifies, and `needsRehash`
 * tells the sign-in to store a new one at the current cost.
 */

// OWASP's minimum for scrypt (Password Storage Cheat Sheet): N=2^17, r=8, p=1.
const COST = 2 ** 17;
const BLOCK_SIZE = 8;
const PARALLELISM = 1;
const KEY_LENGTH = 32;
export const MIN_PASSWORD_LENGTH = 10;

// scrypt needs 128·N·r bytes; Node refuses above `maxmem` (32 MiB by default). The headroom covers
// Node's own bookkeeping on top of the block array.
const maxmemFor = (N: number, r: number): number => 128 * N * r + 2 * 1024 * 1024;

function derive(password: string, salt: Buffer, N: number, r: number, p: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password, salt, KEY_LENGTH, { N, r, p, maxmem: maxmemFor(N, r) }, (error, key) =>
      error ? reject(error) : resolve(key),
    );
  });
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, COST, BLOCK_SIZE, PARALLELISM);
  return [
    'scrypt',
    COST,
    BLOCK_SIZE,
    PARALLELISM,
    salt.toString('base64url'),
    key.toString('base64url'),
  ].join('$');
}

export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  const parts = stored?.split('$') ?? [];
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [, N, r, p, salt, expected] = parts as [string, string, string, string, string, string];
  const key = await derive(password, Buffer.from(salt, 'base64url'), Number(N), Number(r), Number(p));
  const want = Buffer.from(expected, 'base64url');
  return key.length === want.length && timingSafeEqual(key, want);
}

/** Whether `stored` was made with other parameters than new hashes get (an older, cheaper cost). */
export function needsRehash(stored: string): boolean {
  const [scheme, N, r, p] = stored.split('$');
  return scheme !== 'scrypt' || Number(N) !== COST || Number(r) !== BLOCK_SIZE || Number(p) !== PARALLELISM;
}
