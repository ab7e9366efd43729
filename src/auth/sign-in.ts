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

/**
 * One count of attempts (per email, or per address). This process counts every attempt it sees in
 * its own memory; with Redis, Redis's count, shared by every instance, decides whenever Redis
 * answers, and this process's own count decides when it does not (down, frozen, or past its 200 ms
 * deadline on a busy machine). Counting every attempt here, not only those Redis failed, is what
 * keeps a burst that Redis answers only in part to 5 checked passwords on an instance: the attempts
 * Redis answered and those it did not are one count here, in the order they arrived.
 */
class AttemptCount {
  private readonly own: RateLimiterMemory;
  private readonly shared: RateLimiterRedis | null;

  constructor(redis: Redis | null, keyPrefix: string, points: number) {
    this.own = new RateLimiterMemory({ keyPrefix, points, duration: WINDOW_SECONDS });
    this.shared =
      redis === null
        ? null
        : new RateLimiterRedis({
            storeClient: redis,
            keyPrefix: `safety-api:${keyPrefix}`,
            points,
            duration: WINDOW_SECONDS,
          });
  }

  async take(key: string): Promise<Taken> {
    const own = await take(this.own, key);
    if (this.shared === null) return own;
    try {
      return await take(this.shared, key);
    } catch {
      // Redis failing: this process's own count of the key's attempts decides.
      return own;
    }
  }

  /** Gives back the point of an attempt whose password was not checked. */
  async giveBack(key: string): Promise<void> {
    await this.own.reward(key, 1);
    await this.shared?.reward(key, 1).catch(() => {});
  }

  /** Forgets the key's attempts: a successful sign-in. */
  async clear(key: string): Promise<void> {
    await this.own.delete(key);
    await this.shared?.delete(key).catch(() => {});
  }
}

const throttled = (msBeforeNext: number): SignInResult => ({
  outcome: 'throttled',
  retryAfterSeconds: Math.max(Math.ceil(msBeforeNext / 1000), 1),
});

export class SignIn {
  // Unknown emails are checked against this hash too, so the answer time does not tell an
  // attacker which emails have an account. Made once, at the current cost.
  private decoy: Promise<string> | undefined;

  private readonly byEmail: AttemptCount;
  private readonly byAddress: AttemptCount;

  private constructor(byEmail: AttemptCount, byAddress: AttemptCount) {
    this.byEmail = byEmail;
    this.byAddress = byAddress;
  }

  /** `redis` is the process's shared connection (see src/redis.ts), or `null` to count in memory. */
  static create(redis: Redis | null): SignIn {
    return new SignIn(
      new AttemptCount(redis, 'sign-in-email', ATTEMPTS_PER_EMAIL),
      new AttemptCount(redis, 'sign-in-address', ATTEMPTS_PER_ADDRESS),
    );
  }

  async attempt(db: Kysely<Database>, input: SignInAttempt): Promise<SignInResult> {
    const emailKey = input.email.trim().toLowerCase();
    // The address first: an attempt it refuses never touches the email's count.
    const address = await this.byAddress.take(input.address);
    if (!address.ok) return throttled(address.msBeforeNext);
    const email = await this.byEmail.take(emailKey);
    if (!email.ok) {
      // No password is checked, so the address gets its point back: someone retrying a locked
      // email does not also lock everyone behind their address (an office, a NAT).
      await this.byAddress.giveBack(input.address);
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
    await Promise.all([this.byEmail.clear(emailKey), this.byAddress.giveBack(input.address)]);
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
