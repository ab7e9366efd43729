import { randomBytes, scryptSync } from 'node:crypto';

/**
 * A password hash in the stored format at a cost far below production's, so tests that seed many
 * users stay fast. It lives under test/ so production code cannot use it; production still
 * verifies it (older, cheaper hashes keep working) and re-hashes it at the first sign-in.
 */
export function cheapPasswordHash(password: string, N = 2 ** 12): string {
  const salt = randomBytes(16);
  const key = scryptSync(password, salt, 32, { N, r: 8, p: 1, maxmem: 256 * N * 8 });
  return ['scrypt', N, 8, 1, salt.toString('base64url'), key.toString('base64url')].join('$');
}
