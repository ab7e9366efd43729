import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import { keptSecret } from './generated-secrets.ts';

/**
 * Webhook signing secrets at rest: AES-256-GCM under a key that WEBHOOK_SECRETS_KEY gives (then a
 * copy of the database alone reveals no secret), or that the service generates once and keeps in
 * the database (then a dump of the endpoints table alone reveals none). Stored as
 * `v1.<iv>.<tag>.<ciphertext>`, base64url; the endpoint's id is bound in as associated data, so a
 * ciphertext copied onto another endpoint does not decrypt.
 */

const VERSION = 'v1';

export class SecretBox {
  private readonly key: Buffer;

  constructor(key: Buffer) {
    this.key = key;
  }

  seal(endpointId: string, secret: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(endpointId));
    const sealed = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
    return [VERSION, iv, cipher.getAuthTag(), sealed]
      .map((part) => (typeof part === 'string' ? part : part.toString('base64url')))
      .join('.');
  }

  open(endpointId: string, stored: string): string {
    const [version, iv, tag, sealed] = stored.split('.');
    if (version !== VERSION || iv === undefined || tag === undefined || sealed === undefined)
      throw new Error('webhook secret: unknown format');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    decipher.setAAD(Buffer.from(endpointId));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(sealed, 'base64url')), decipher.final()]).toString(
      'utf8',
    );
  }
}

/** The box of this database: the configured key, or the generated one, loaded at the first call and kept. */
export function secretBoxOf(db: Kysely<Database>, configuredKey: Buffer | null): () => Promise<SecretBox> {
  if (configuredKey !== null) {
    const box = Promise.resolve(new SecretBox(configuredKey));
    return () => box;
  }
  return keptSecret(
    db,
    'webhook_secrets',
    () => randomBytes(32).toString('base64url'),
    (key) => new SecretBox(Buffer.from(key, 'base64url')),
  );
}
