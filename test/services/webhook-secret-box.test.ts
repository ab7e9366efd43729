import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { webhookRepository } from '../../src/db/repositories/webhooks.ts';
import { SecretBox } from '../../src/services/webhook-secret-box.ts';
import { createTestContext, STORES, seedAccount, type TestContext } from '../helpers.ts';

describe('webhook secrets at rest', () => {
  test('sealed with AES-256-GCM: opens only with its key, on its own endpoint, unaltered', () => {
    const box = new SecretBox(randomBytes(32));
    const sealed = box.seal('endpoint-1', 'whsec_abc');
    assert.ok(!sealed.includes('whsec_abc'));
    assert.equal(box.open('endpoint-1', sealed), 'whsec_abc');
    assert.notEqual(box.seal('endpoint-1', 'whsec_abc'), sealed, 'a fresh IV every time');
    assert.throws(() => box.open('endpoint-2', sealed), 'bound to its endpoint');
    assert.throws(() => new SecretBox(randomBytes(32)).open('endpoint-1', sealed), 'another key');
    const parts = sealed.split('.');
    const flipped = Buffer.from(parts[3] ?? '', 'base64url');
    flipped[0] = (flipped[0] ?? 0) ^ 1;
    assert.throws(() =>
      box.open('endpoint-1', [...parts.slice(0, 3), flipped.toString('base64url')].join('.')),
    );
  });
});

for (const store of STORES) {
  describe(`webhook secrets in the database (${store})`, () => {
    let ctx: TestContext;
    let configured: TestContext;
    before(async () => {
      ctx = await createTestContext(store, { WEBHOOKS_ALLOW_PRIVATE: 'true' });
      configured = await createTestContext(store, {
        WEBHOOKS_ALLOW_PRIVATE: 'true',
        WEBHOOK_SECRETS_KEY: randomBytes(32).toString('base64'),
      });
    });
    after(async () => {
      await ctx.close();
      await configured.close();
    });

    test('the stored secret is not the secret, and opens to it; rotation keeps the previous one sealed too', async () => {
      const accountId = await seedAccount(ctx.db);
      const { endpoint, secret } = await ctx.runtime.services.webhooks.create({
        accountId,
        url: 'http://127.0.0.1:9/hook',
        actor: 'test',
      });
      const row = await webhookRepository.findById(ctx.db, endpoint.id);
      assert.ok(row !== undefined);
      assert.ok(!row.secret.includes(secret.slice(6)), 'not stored in the clear');
      assert.deepEqual(await ctx.runtime.services.webhooks.signingSecrets(row, new Date()), [secret]);
      const { secret: next } = await ctx.runtime.services.webhooks.rotateSecret(endpoint.id, 'test');
      const rotated = await webhookRepository.findById(ctx.db, endpoint.id);
      assert.ok(rotated !== undefined);
      assert.ok(
        !JSON.stringify(rotated).includes(secret.slice(6)) &&
          !JSON.stringify(rotated).includes(next.slice(6)),
      );
      assert.deepEqual(await ctx.runtime.services.webhooks.signingSecrets(rotated, new Date()), [
        next,
        secret,
      ]);
      const kinds = await ctx.db.selectFrom('generated_secrets').select('kind').execute();
      assert.ok(
        kinds.some((k) => k.kind === 'webhook_secrets'),
        'the generated key is kept in the database',
      );
    });

    test('with WEBHOOK_SECRETS_KEY, no key is kept in the database', async () => {
      const accountId = await seedAccount(configured.db);
      const { endpoint, secret } = await configured.runtime.services.webhooks.create({
        accountId,
        url: 'http://127.0.0.1:9/hook',
        actor: 'test',
      });
      const row = await webhookRepository.findById(configured.db, endpoint.id);
      assert.ok(row !== undefined);
      assert.deepEqual(await configured.runtime.services.webhooks.signingSecrets(row, new Date()), [secret]);
      const kinds = await configured.db.selectFrom('generated_secrets').select('kind').execute();
      assert.ok(!kinds.some((k) => k.kind === 'webhook_secrets'));
    });
  });
}
