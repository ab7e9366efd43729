import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import type { KeyForAuth } from '../../../src/db/repositories/api-keys.ts';
import { cachedResponder } from '../../../src/routes/public/response-cache.ts';

const CACHE_BYTES = 64 * 1024;

const KEY: KeyForAuth = {
  id: 'key',
  account_id: 'account',
  scope: 'read',
  state: 'active',
  expires_at: null,
  api_access: 1,
  rate_limit_per_hour: 1000,
  incident_count: 0,
  data_version: 1,
  account_created_at: '2026-01-01T00:00:00.000Z',
};

/**
 * The responder on a bare application, its key check replaced by a fixed key: `/body/:size`
 * answers a body of about `size` bytes, and `produced` counts the bodies built rather than served
 * from the cache.
 */
function bareApp(): { app: FastifyInstance; produced: () => number } {
  const app = Fastify();
  app.decorateRequest('apiKey', null as never);
  app.addHook('onRequest', (request, _reply, done) => {
    request.apiKey = KEY;
    done();
  });
  const respond = cachedResponder(CACHE_BYTES);
  let produced = 0;
  app.get<{ Params: { size: string } }>(
    '/body/:size',
    { schema: { response: { 200: { type: 'object', properties: { data: { type: 'string' } } } } } },
    (request, reply) =>
      respond(request, reply, request.params.size, async () => {
        produced += 1;
        return { data: 'x'.repeat(Number(request.params.size)) };
      }),
  );
  return { app, produced: () => produced };
}

describe('response cache', () => {
  test('a repeated read is served from the cache, with the same bytes and ETag', async () => {
    const { app, produced } = bareApp();
    const first = await app.inject({ url: '/body/1000' });
    const second = await app.inject({ url: '/body/1000' });
    assert.equal(produced(), 1);
    assert.equal(second.statusCode, 200);
    assert.equal(second.body, first.body);
    assert.equal(second.headers.etag, first.headers.etag);
    assert.equal(second.headers['content-type'], 'application/json; charset=utf-8');
  });

  test('a body bigger than an eighth of the bound is served but never cached', async () => {
    const { app, produced } = bareApp();
    const size = CACHE_BYTES / 8 + 1;
    const first = await app.inject({ url: `/body/${size}` });
    const second = await app.inject({ url: `/body/${size}` });
    assert.equal(produced(), 2);
    assert.equal(second.body, first.body);
    assert.equal(second.headers.etag, first.headers.etag);
  });

  test('past the bound in bytes, the least recently used bodies go first', async () => {
    const { app, produced } = bareApp();
    // Ten bodies of about 7 KB: more than 64 KiB together, each under an eighth of it.
    for (let i = 0; i < 10; i += 1) await app.inject({ url: `/body/${7000 + i}` });
    assert.equal(produced(), 10);
    await app.inject({ url: '/body/7009' });
    assert.equal(produced(), 10, 'the newest is still cached');
    await app.inject({ url: '/body/7000' });
    assert.equal(produced(), 11, 'the oldest was evicted');
  });
});
