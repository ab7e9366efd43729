import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createTestContext, type TestContext } from '../helpers.ts';
import { DocumentCheck } from './document-check.ts';

describe('/docs', () => {
  let ctx: TestContext;

  before(async () => {
    ctx = await createTestContext('sqlite');
  });
  after(() => ctx.close());

  test('an HTML reference of every operation, its responses and examples, from the served document', async () => {
    const check = await DocumentCheck.of(ctx.app);
    const res = await ctx.app.inject({ url: '/docs' });
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
    for (const id of check.operationIds()) assert.ok(res.body.includes(`id="${id}"`), id);
    for (const text of ['Incidents', 'Directory', 'Wider API', 'X-RateLimit-Reset', 'Retry-After', 'ETag']) {
      assert.ok(res.body.includes(text), text);
    }
    assert.ok(res.body.includes('id="schema-Incident"'));
    assert.ok(res.body.includes('under_investigation'), 'the example incident');
    assert.ok(res.body.includes('default 50'), 'the limit default');
  });

  test('no credential, not counted, nothing from elsewhere: the CSP allows only own styles', async () => {
    const res = await ctx.app.inject({ url: '/docs', headers: { authorization: 'Bearer nonsense' } });
    assert.equal(res.statusCode, 200);
    const csp = String(res.headers['content-security-policy']);
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /style-src 'self'/);
    assert.doesNotMatch(csp, /script-src/);
    assert.equal(res.headers['x-content-type-options'], 'nosniff');
    assert.doesNotMatch(res.body, /<script/);
    assert.doesNotMatch(res.body, /(?:src|href)="(?:https?:)?\/\//, 'no external resource');
    const css = res.body.match(/<link rel="stylesheet" href="([^"]+)"/)?.[1];
    assert.ok(css);
    assert.equal((await ctx.app.inject({ url: css })).statusCode, 200);
    assert.equal(res.headers['x-ratelimit-limit'], undefined);
  });
});
