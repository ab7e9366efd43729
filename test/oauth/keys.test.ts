import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import { loadOauthKeys } from '../../src/oauth/keys.ts';
import { createTestContext, STORES, type TestContext } from '../helpers.ts';

for (const store of STORES) {
  describe(`OAuth signing and cookie keys (${store})`, () => {
    let ctx: TestContext;
    before(async () => {
      ctx = await createTestContext(store);
    });
    after(() => ctx.close());

    test('generated once, stored, and the same for every later start', async () => {
      // The app generated them when it started; a second start reads the same ones.
      const stored = await ctx.db.selectFrom('generated_secrets').select('kind').orderBy('kind').execute();
      assert.deepEqual(
        stored.map((r) => r.kind),
        ['cookie_keys', 'jwks'],
      );
      const first = await loadOauthKeys(ctx.db, ctx.config);
      const second = await loadOauthKeys(ctx.db, ctx.config);
      assert.deepEqual(second, first);
      assert.equal(first.jwks.keys[0]?.alg, 'RS256');
      assert.ok(first.jwks.keys[0]?.d, 'a private key');
    });

    test('configured keys win over stored ones', async () => {
      const jwk = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' });
      const config = loadConfig({
        OAUTH_JWKS: JSON.stringify({ keys: [jwk] }),
        OAUTH_COOKIE_KEYS: `${'a'.repeat(32)},${'b'.repeat(32)}`,
      });
      const keys = await loadOauthKeys(ctx.db, config);
      assert.equal(keys.jwks.keys[0]?.x, jwk.x);
      assert.deepEqual(keys.cookieKeys, ['a'.repeat(32), 'b'.repeat(32)]);
    });

    test('bad key configuration stops the start with one readable message', () => {
      assert.throws(() => loadConfig({ OAUTH_JWKS: '{"keys":[{"kty":"RSA"}]}' }), /OAUTH_JWKS must be/);
      assert.throws(() => loadConfig({ OAUTH_COOKIE_KEYS: 'short' }), /OAUTH_COOKIE_KEYS must be/);
    });
  });
}
