import { createHash, createHmac, createSecretKey, type KeyObject, randomBytes } from 'node:crypto';

/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com, docs/design.md "Webhooks"): a secret
 * is `whsec_` + base64 of 32 random bytes; a signature is `v1,` + base64 of HMAC-SHA256 over
 * `{webhook-id}.{webhook-timestamp}.{body}`, keyed by the secret's decoded bytes. During a rotation's
 * overlap the header holds one signature per secret, space-separated, so that a receiver holding
 * either secret verifies the message.
 */

const SECRET_PREFIX = 'whsec_';
const SECRET_BYTES = 32;

export function generateSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString('base64')}`;
}

/** Standard base64, padded: Buffer.from(…, 'base64') would skip any other character silently. */
const STRICT_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
/** What a secret's key may hold (Standard Webhooks: 24 to 64 bytes); ours are `SECRET_BYTES`. */
const MIN_SECRET_BYTES = 24;
const MAX_SECRET_BYTES = 64;

/** The key bytes of a `whsec_` secret; throws, naming no byte of it, for anything else. */
function secretBytes(secret: string): Buffer {
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : null;
  const bytes = encoded !== null && STRICT_BASE64.test(encoded) ? Buffer.from(encoded, 'base64') : null;
  if (bytes === null || bytes.length < MIN_SECRET_BYTES || bytes.length > MAX_SECRET_BYTES) {
    throw new Error(
      `a webhook secret must be ${SECRET_PREFIX} and the base64 of ${MIN_SECRET_BYTES} to ${MAX_SECRET_BYTES} bytes`,
    );
  }
  return bytes;
}

/**
 * The keys of `secrets` (newest first), ready to sign with: KeyObjects, made once per batch of
 * events, because createHmac prepares a raw key anew at every call, at 6 times the cost. A secret
 * that is not a whole `whsec_` key throws: nothing is ever signed with an empty or partial key.
 */
export function signingKeys(secrets: readonly string[]): KeyObject[] {
  return secrets.map((secret) => createSecretKey(secretBytes(secret)));
}

export interface SignedHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

/** The three Standard Webhooks headers of one attempt, signed with every key of `signingKeys`. */
export function signedHeaders(
  webhookId: string,
  timestampSeconds: number,
  body: string,
  keys: readonly KeyObject[],
): SignedHeaders {
  const signed = `${webhookId}.${timestampSeconds}.${body}`;
  const signatures = keys.map((key) => `v1,${createHmac('sha256', key).update(signed).digest('base64')}`);
  return {
    'webhook-id': webhookId,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': signatures.join(' '),
  };
}

/**
 * The `webhook-id` of a change's event to one endpoint: the same on every attempt and resend of
 * that change, different for every other event, and revealing nothing.
 */
export function changeWebhookId(endpointId: string, seq: number): string {
  return `msg_${createHash('sha256').update(`${endpointId}:${seq}`).digest('base64url').slice(0, 27)}`;
}

/** The `webhook-id` of a test event: new every time. */
export function testWebhookId(): string {
  return `msg_test_${randomBytes(16).toString('base64url')}`;
}
