import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { acceptsGzip } from '../../src/openapi/docs-script.ts';
import { createTestContext, type TestContext } from '../helpers.ts';

// The page and its script as the server sends them; what they do in a browser is
// test/browser/docs.test.ts.

const BUNDLE = readFileSync(new URL('browser/standalone.js', import.meta.resolve('@scalar/api-reference')));

/** The value of `attribute` on the element with `id`, entities decoded as a browser would. */
function attributeOf(page: string, id: string, attribute: string): string | undefined {
  const element = new RegExp(`<[^>]*\\bid="${id}"[^>]*>`).exec(page)?.[0];
  const value = element && new RegExp(`\\b${attribute}="([^"]*)"`).exec(element)?.[1];
  return value
    ?.replaceAll('&quot;', '"')
    .replaceAll('&#39;', "'")
    .replaceAll('&lt;', '<')
    .replaceAll('&gt;', '>')
    .replaceAll('&amp;', '&');
}

describe('/docs', () => {
  let ctx: TestContext;

  before(async () => {
    ctx = await createTestContext('sqlite');
  });
  after(() => ctx.close());

  const scriptPath = (page: string) =>
    /<script src="(\/docs\/scalar-[0-9a-f]{16}\.js)"><\/script>/.exec(page)?.[1];

  test('a page that loads Scalar from the service, under a strict CSP, with no credential', async () => {
    const res = await ctx.app.inject({ url: '/docs', headers: { authorization: 'Bearer nonsense' } });
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
    assert.equal(res.headers['x-content-type-options'], 'nosniff');
    assert.equal(res.headers['x-ratelimit-limit'], undefined, 'not counted');
    assert.deepEqual(String(res.headers['content-security-policy']).split('; '), [
      "default-src 'none'",
      "script-src 'self'",
      "style-src 'unsafe-inline'",
      'img-src data:',
      "connect-src 'self'",
      "frame-ancestors 'none'",
      "base-uri 'none'",
      "form-action 'none'",
    ]);
    assert.doesNotMatch(res.body, /(?:https?:)?\/\//, 'no URL of another host');
    assert.ok(scriptPath(res.body), 'the script, by its versioned path');
    // Scripts: the bundle, and the configuration as data, which a browser does not run.
    assert.deepEqual(
      [...res.body.matchAll(/<script\b[^>]*>/g)].map(([tag]) =>
        tag.replace(/\s+data-configuration="[^"]*"/, ''),
      ),
      [`<script id="api-reference" type="application/json">`, `<script src="${scriptPath(res.body)}">`],
    );
  });

  test("Scalar is configured to stay on the service, showing the document's samples and only fetch of its own", async () => {
    const page = (await ctx.app.inject({ url: '/docs' })).body;
    const configuration = JSON.parse(attributeOf(page, 'api-reference', 'data-configuration') ?? '{}');
    assert.equal(configuration.url, '/openapi.json');
    assert.equal(configuration.withDefaultFonts, false, 'no fonts.scalar.com');
    assert.equal(configuration.hideClientButton, true, 'no request client, no proxy.scalar.com');
    assert.equal(configuration.showDeveloperTools, 'never');
    assert.deepEqual(configuration.agent, { disabled: true });
    assert.deepEqual(configuration.mcp, { disabled: true });
    // No default client of Scalar's: the document's first sample (curl) is shown. Of the clients
    // Scalar generates, only JavaScript's fetch is offered; its curl would repeat the document's.
    assert.equal(configuration.defaultHttpClient, undefined);
    assert.equal(configuration.hiddenClients.shell, true);
    assert.deepEqual(configuration.hiddenClients.js, ['axios', 'jquery', 'ofetch', 'xhr']);
    assert.ok(
      Object.entries(configuration.hiddenClients).every(
        ([target, hidden]) => target === 'js' || hidden === true,
      ),
    );
    assert.equal(configuration.proxyUrl, undefined);
  });

  test('the script: the installed bundle as JavaScript, cached for good, gzipped when asked', async () => {
    const path = scriptPath((await ctx.app.inject({ url: '/docs' })).body);
    assert.ok(path);

    const plain = await ctx.app.inject({ url: path });
    assert.equal(plain.statusCode, 200);
    assert.equal(plain.headers['content-type'], 'text/javascript; charset=utf-8');
    assert.equal(plain.headers['cache-control'], 'public, max-age=31536000, immutable');
    assert.equal(plain.headers['x-content-type-options'], 'nosniff');
    assert.equal(plain.headers.vary, 'accept-encoding');
    assert.equal(plain.headers['content-encoding'], undefined);
    assert.ok(plain.rawPayload.equals(BUNDLE), 'the standalone bundle of @scalar/api-reference');

    const gzipped = await ctx.app.inject({ url: path, headers: { 'accept-encoding': 'gzip, deflate, br' } });
    assert.equal(gzipped.headers['content-encoding'], 'gzip');
    assert.equal(gzipped.headers['content-type'], 'text/javascript; charset=utf-8');
    assert.ok(gzipped.rawPayload.length < BUNDLE.length / 2);
    assert.ok(gunzipSync(gzipped.rawPayload).equals(BUNDLE));

    const refused = await ctx.app.inject({ url: path, headers: { 'accept-encoding': 'gzip;q=0' } });
    assert.equal(refused.headers['content-encoding'], undefined);

    // Another version's name (a page cached from before an upgrade) is not this script.
    assert.equal((await ctx.app.inject({ url: '/docs/scalar-0000000000000000.js' })).statusCode, 404);
  });

  test('Accept-Encoding: gzip admitted by name or by *, unless its weight is 0', () => {
    for (const header of ['gzip', 'deflate, GZIP', 'br;q=1.0, gzip;q=0.5', '*', 'identity, *;q=0.1']) {
      assert.equal(acceptsGzip(header), true, header);
    }
    for (const header of [undefined, '', 'identity', 'br, deflate', 'gzip;q=0', '*;q=0', 'gzip;q=0, *']) {
      assert.equal(acceptsGzip(header), false, header);
    }
  });
});
