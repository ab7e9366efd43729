import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Kysely } from 'kysely';
import {
  type RateLimiterAbstract,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
} from 'rate-limiter-flexible';
import { type UserAccountRow, userRepository } from '../db/repositories/users.ts';
import type { Database } from '../db/schema.ts';
import { hashPassword, needsRehash, verifyPassword } from './passwords.ts';
import { isStorableText } from '../lib/storable-text.ts';

/**
 * Signing in with email and password, for every form that takes them (the admin panel and the
 * OAuth sign-in page): one throttle per process, shared by both forms, and through Redis by every
 * instance. An attempt is counted before its password is checked, atomically in the counter, so
 * concurrent guesses are bounded exactly like sequential ones: at most 5 passwords are checked per
 * email and 20 per client address in 15 minutes, however many requests arrive at once.
 */

const WINDOW_SECONDS = 15 * 60;
const ATTEMPTS_PER_EMAIL = 5;
const ATTEMPTS_PER_ADDRESS = 20;

export type SignInResult =
  | { outcome: 'throttled'; retryAfterSeconds: number }
  /** Unknown email or wrong password: the two are never told apart. */
  | { outcome: 'incorrect' }
  | { outcome: 'signed-in'; user: UserAccountRow };

export interface SignInAttempt {
  email: string;
  password: string;
  /** The client address (request.ip, which honours TRUST_PROXY). */
  address: string;
}

type Taken = { ok: true } | { ok: false; msBeforeNext: number };

function limiter(redis: Redis | null, keyPrefix: string, points: number): RateLimiterAbstract {
  const memory = (prefix: string) =>
    new RateLimiterMemory({ keyPrefix: prefix, points, duration: WINDOW_SECONDS });
  if (redis === null) return memory(keyPrefix);
  return new RateLimiterRedis({
    storeClient: redis,
    keyPrefix: `safety-api:${keyPrefix}`,
    points,
    duration: WINDOW_SECONDS,
    // Redis failing: each instance counts on its own rather than refusing every sign-in.
    insuranceLimiter: memory(`${keyPrefix}:insurance`),
  });
}

const throttled = (msBeforeNext: number): SignInResult => ({
  outcome: 'throttled',
  retryAfterSeconds: Math.max(Math.ceil(msBeforeNext / 1000), 1),
});

/** Takes one point of `key`; a refusal (the allowance is used up) is an answer, not an error. */
async function take(counter: RateLimiterAbstract, key: string): Promise<Taken> {
  try {
    await counter.consume(key);
    return { ok: true };
  } catch (refusal) {
    if (refusal instanceof RateLimiterRes) return { ok: false, msBeforeNext: refusal.msBeforeNext };
    throw refusal;
  }
}

export class SignIn {
  // Unknown emails are checked against this hash too, so the answer time does not tell an
  // attacker which emails have an account. Made once, at the current cost.
  private decoy: Promise<string> | undefined;

  private readonly byEmail: RateLimiterAbstract;
  private readonly byAddress: RateLimiterAbstract;

  private constructor(byEmail: RateLimiterAbstract, byAddress: RateLimiterAbstract) {
    this.byEmail = byEmail;
    this.byAddress = byAddress;
  }

  /** `redis` is the process's shared connection (see src/redis.ts), or `null` to count in memory. */
  static create(redis: Redis | null): SignIn {
    return new SignIn(
      limiter(redis, 'sign-in-email', ATTEMPTS_PER_EMAIL),
      limiter(redis, 'sign-in-address', ATTEMPTS_PER_ADDRESS),
    );
  }

  async attempt(db: Kysely<Database>, input: SignInAttempt): Promise<SignInResult> {
    const emailKey = input.email.trim().toLowerCase();
    // The address first: an attempt it refuses never touches the email's count.
    const address = await take(this.byAddress, input.address);
    if (!address.ok) return throttled(address.msBeforeNext);
    const email = await take(this.byEmail, emailKey);
    if (!email.ok) {
      // No password is checked, so the address gets its point back: someone retrying a locked
      // email does not also lock everyone behind their address (an office, a NAT).
      await this.byAddress.reward(input.address, 1);
      return throttled(email.msBeforeNext);
    }

    // An email no store can hold (a NUL character, say) is no user's, and is not looked up.
    const user = isStorableText(input.email)
      ? await userRepository.findByEmail(db, input.email.trim())
      : undefined;
    const stored = user?.password_hash ?? null;
    const verified = await verifyPassword(input.password, stored ?? (await this.decoyHash()));
    if (user === undefined || stored === null || !verified) return { outcome: 'incorrect' };

    // A person's earlier typos do not linger, and a successful sign-in is not a guess from the
    // address (an office behind one address signs in many people).
    await Promise.all([this.byEmail.delete(emailKey), this.byAddress.reward(input.address, 1)]);
    if (needsRehash(stored)) {
      // Only if the hash is still the one just verified: a password set meanwhile must win.
      await userRepository.replacePasswordHash(db, user.id, stored, await hashPassword(input.password));
    }
    return { outcome: 'signed-in', user };
  }

  private decoyHash(): Promise<string> {
    this.decoy ??= hashPassword(randomBytes(32).toString('hex'));
    return this.decoy;
  }
}
