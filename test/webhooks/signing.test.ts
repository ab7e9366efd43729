import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import {
  changeWebhookId,
  generateSecret,
  signedHeaders,
  signingKeys,
  testWebhookId,
} from '../../src/webhooks/signing.ts';

// Our signatures are checked with the `standardwebhooks` package, an independent implementation
// of the specification, never with our own signer.

describe('webhook signing', () => {
  test('a secret is whsec_ and the base64 of 32 random bytes; no two alike', () => {
    const secrets = new Set(Array.from({ length: 50 }, generateSecret));
    assert.equal(secrets.size, 50);
    for (const secret of secrets) {
      assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
      assert.equal(Buffer.from(secret.slice(6), 'base64').length, 32);
    }
  });

  test('a secret that is not a whole whsec_ key of 24 to 64 bytes signs nothing: it throws without showing itself', () => {
    const bytes = (n: number) => Buffer.alloc(n, 7).toString('base64');
    for (const secret of [
      'whsec_',
      'whsec_abc',
      `whsec_${bytes(23)}`,
      `whsec_${bytes(65)}`,
      bytes(32),
      `whsec_${bytes(32)}!`,
      `whsec_${bytes(32).slice(0, -1)}`,
    ]) {
      assert.throws(
        () => signingKeys([secret]),
        (error: Error) =>
          error.message === 'a webhook secret must be whsec_ and the base64 of 24 to 64 bytes',
        JSON.stringify(secret),
      );
    }
    for (const n of [24, 32, 64]) assert.equal(signingKeys([`whsec_${bytes(n)}`]).length, 1, `${n} bytes`);
  });

  test('the standardwebhooks package verifies our headers, and refuses a changed body, id or timestamp', () => {
    const secret = generateSecret();
    const body = JSON.stringify({
      type: 'incident.created',
      data: { id: 'x', seq: 7, note: 'é ✓ "quoted"' },
    });
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = signedHeaders('msg_abc', timestamp, body, signingKeys([secret]));
    assert.match(headers['webhook-signature'], /^v1,[A-Za-z0-9+/]{43}=$/);
    assert.deepEqual(new Webhook(secret).verify(body, { ...headers }), JSON.parse(body));
    assert.throws(() => new Webhook(secret).verify(`${body} `, { ...headers }));
    assert.throws(() => new Webhook(secret).verify(body, { ...headers, 'webhook-id': 'msg_abd' }));
    assert.throws(() =>
      new Webhook(secret).verify(body, { ...headers, 'webhook-timestamp': String(timestamp + 1) }),
    );
    assert.throws(() => new Webhook(generateSecret()).verify(body, { ...headers }), 'another secret fails');
  });

  test('during an overlap both secrets sign: a receiver holding either one verifies', () => {
    const [next, previous] = [generateSecret(), generateSecret()];
    const body = '{"type":"user.updated"}';
    const headers = signedHeaders(
      'msg_1',
      Math.floor(Date.now() / 1000),
      body,
      signingKeys([next, previous]),
    );
    assert.equal(headers['webhook-signature'].split(' ').length, 2);
    assert.ok(new Webhook(next).verify(body, { ...headers }));
    assert.ok(new Webhook(previous).verify(body, { ...headers }));
    assert.throws(() => new Webhook(generateSecret()).verify(body, { ...headers }));
  });

  test("a change's webhook-id is the same for the same endpoint and seq, different otherwise; test ids never repeat", () => {
    assert.equal(changeWebhookId('ep-1', 42), changeWebhookId('ep-1', 42));
    assert.notEqual(changeWebhookId('ep-1', 42), changeWebhookId('ep-1', 43));
    assert.notEqual(changeWebhookId('ep-1', 42), changeWebhookId('ep-2', 42));
    assert.match(changeWebhookId('ep-1', 42), /^msg_[A-Za-z0-9_-]{27}$/);
    assert.notEqual(testWebhookId(), testWebhookId());
  });
});
