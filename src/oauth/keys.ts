import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { JWK } from 'oidc-provider';
import type { Config } from '../config.ts';
import type { Database } from '../db/schema.ts';
import { storedOrGenerated } from '../services/generated-secrets.ts';

/**
 * Token signing keys and cookie keys. Configuration wins; otherwise the first instance to start
 * generates them and stores them in the database, so every instance and every restart signs with
 * the same keys (oidc-provider's development keys are never used).
 */

export interface OauthKeys {
  jwks: { keys: JWK[] };
  cookieKeys: string[];
}

function generateJwks(): { keys: JWK[] } {
  // RS256 is the one algorithm every OpenID Connect client must support.
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = privateKey.export({ format: 'jwk' });
  return { keys: [{ ...jwk, kid: randomUUID(), alg: 'RS256', use: 'sig' } as JWK] };
}

function generateCookieKeys(): string[] {
  return [randomBytes(32).toString('base64url')];
}

export async function loadOauthKeys(db: Kysely<Database>, config: Config): Promise<OauthKeys> {
  return {
    jwks: (config.oauthJwks as { keys: JWK[] } | null) ?? (await storedOrGenerated(db, 'jwks', generateJwks)),
    cookieKeys: config.oauthCookieKeys ?? (await storedOrGenerated(db, 'cookie_keys', generateCookieKeys)),
  };
}
