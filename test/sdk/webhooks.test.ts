import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { verifyWebhook, WebhookVerificationError } from '../../packages/sdk/src/index.ts';
import { INCIDENT_EXAMPLE } from '../../src/schemas/public.ts';
import { changeEventBody } from '../../src/webhooks/payload.ts';
import { generateSecret, signedHeaders, signingKeys } from '../../src/webhooks/signing.ts';

/** The SDK's verifyWebhook against bodies and signatures made by the server's own signer. */

const now = () => Math.floor(Date.now() / 1000);

const body = changeEventBody(
  'incident.updated',
  {
    seq: 42,
    type: 'incident',
    op: 'upsert',
    id: INCIDENT_EXAMPLE.id,
    object: INCIDENT_EXAMPLE,
    changed_at: INCIDENT_EXAMPLE.updated_at,
    createdSeq: 7,
  },
  'AQAAAAAEEwAAAAAEE2sGrTlx0kmCzxuCqIWnEytRqWJ6',
);

/** The server's three headers as a plain record, as Node's `req.headers` would hold them. */
const signed = (id: string, timestamp: number, secrets: string[]) => ({
  ...signedHeaders(id, timestamp, body, signingKeys(secrets)),
});

describe('verifyWebhook', () => {
  test('accepts what the server signs and returns the typed event', () => {
    const secret = generateSecret();
    const headers = signed('msg_1', now(), [secret]);
    const event = verifyWebhook(body, headers, secret);
    // The type narrows on `type`: an incident's event carries an Incident.
    assert.ok(event.type === 'incident.updated');
    assert.equal(event.data.object.incident_number, INCIDENT_EXAMPLE.incident_number);
    assert.equal(event.data.seq, 42);
  });

  test('takes bytes and Fetch API headers, and either secret during a rotation', () => {
    const [newer, older] = [generateSecret(), generateSecret()];
    const headers = new Headers(signed(`msg_${randomUUID()}`, now(), [newer, older]));
    assert.equal(verifyWebhook(Buffer.from(body), headers, older).type, 'incident.updated');
    assert.equal(verifyWebhook(new TextEncoder().encode(body), headers, newer).type, 'incident.updated');
  });

  test('refuses a tampered body, another secret, an old timestamp and missing headers', () => {
    const secret = generateSecret();
    const headers = signed('msg_2', now(), [secret]);
    assert.throws(
      () => verifyWebhook(body.replace('INC-2025-142', 'INC-2025-143'), headers, secret),
      WebhookVerificationError,
    );
    assert.throws(() => verifyWebhook(body, headers, generateSecret()), WebhookVerificationError);
    const stale = signed('msg_3', now() - 600, [secret]);
    assert.throws(() => verifyWebhook(body, stale, secret), WebhookVerificationError);
    assert.throws(
      () => verifyWebhook(body, { 'webhook-id': 'msg_2', 'webhook-timestamp': String(now()) }, secret),
      WebhookVerificationError,
    );
  });
});
