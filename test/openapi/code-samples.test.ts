import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { SafetyClient } from '../../packages/sdk/src/index.ts';
import { codeSamples } from '../../src/openapi/code-samples.ts';
import { PUBLIC_API_PATH } from '../../src/paths.ts';
import { INCIDENT_EXAMPLE } from '../../src/schemas/public.ts';
import { DocumentCheck, type Operation } from './document-check.ts';
import { type ExampleServer, runShell, runTypeScript, startExampleServer, typeCheck } from './examples.ts';

// The request samples of /openapi.json (`x-codeSamples`, which /docs shows with each operation):
// curl for every operation, the TypeScript SDK beside it wherever the SDK has the operation, and
// every one of them run against a real server as a reader would paste it.

interface Sample {
  lang: string;
  label: string;
  source: string;
}

const samplesOf = (operation: Operation): Sample[] => {
  const samples = operation.operation['x-codeSamples'];
  assert.ok(Array.isArray(samples), `${operation.operationId} has x-codeSamples`);
  return samples;
};

const sourceOf = (operation: Operation, label: string): string | undefined =>
  samplesOf(operation).find((sample) => sample.label === label)?.source;

/** The SDK's client methods a sample calls (`client.listIncidents(`). */
const clientCalls = (source: string): string[] =>
  [...source.matchAll(/\bclient\.(\w+)\(/g)].map(([, name = '']) => name);

/** The SDK's method for an operation: the CSV exports share the NDJSON export's method. */
const sdkMethodOf = (operationId: string): string => operationId.replace(/Csv$/, '');

describe('request samples (x-codeSamples)', () => {
  let examples: ExampleServer;
  let check: DocumentCheck;
  let baseUrl: string;

  before(async () => {
    examples = await startExampleServer();
    baseUrl = examples.server.baseUrl;
    check = await DocumentCheck.of(examples.server.ctx.app);
  });
  after(() => examples.close());

  test('every operation has curl first, and the TypeScript SDK wherever the SDK has the operation: the whole public API', () => {
    const operations = check.operations();
    assert.ok(operations.length >= 30, 'the document has the operations');
    for (const operation of operations) {
      const isPublic = operation.path.startsWith(`${PUBLIC_API_PATH}/`);
      assert.deepEqual(
        samplesOf(operation).map(({ lang, label }) => [lang, label]),
        [['curl', 'curl'], ...(isPublic ? [['TypeScript', 'TypeScript SDK']] : [])],
        operation.operationId,
      );
      const curl = sourceOf(operation, 'curl') ?? '';
      assert.match(curl, /^curl /, operation.operationId);
      const url = `${baseUrl}${operation.path.replace('{id}', INCIDENT_EXAMPLE.id)}`;
      assert.ok(curl.includes(`"${url}`), `${operation.operationId} asks for ${url}:\n${curl}`);
    }
  });

  test('each SDK sample calls the operation’s method, and only methods the client has', () => {
    const withSdk = check.operations().filter((operation) => sourceOf(operation, 'TypeScript SDK'));
    assert.equal(withSdk.length, 14, 'the public API: 5 reads, 8 exports and the changes feed');
    for (const operation of withSdk) {
      const source = sourceOf(operation, 'TypeScript SDK') ?? '';
      assert.match(source, /from '@safety-incident\/sdk';/, operation.operationId);
      const calls = clientCalls(source);
      assert.ok(
        calls.includes(sdkMethodOf(operation.operationId)),
        `${operation.operationId}: ${calls.join(', ')}`,
      );
      for (const name of calls) {
        assert.equal(
          typeof Reflect.get(SafetyClient.prototype, name),
          'function',
          `SafetyClient has ${name}()`,
        );
      }
    }
  });

  test('a sample is written for an operation the document has, and no other', () => {
    assert.deepEqual(Object.keys(codeSamples(baseUrl)).sort(), check.operationIds().sort());
  });

  test("the Client Libraries box offers the samples' languages, whose pick switches every operation's sample", () => {
    const installation = check.at('/info/x-scalar-sdk-installation');
    assert.ok(Array.isArray(installation));
    assert.deepEqual(
      installation.map(({ lang }: { lang: string }) => lang),
      ['curl', 'TypeScript'],
    );
  });

  test('every curl sample runs: each request it makes succeeds', async () => {
    // Revoking the refresh token ends the grant of the access token the others use: last.
    const operations = check
      .operations()
      .sort((a, b) => Number(a.operationId === 'revokeToken') - Number(b.operationId === 'revokeToken'));
    for (const operation of operations) {
      const { stdout } = await runShell(sourceOf(operation, 'curl') ?? '', examples);
      assert.ok(stdout.length > 0, `${operation.operationId} printed something`);
    }
  });

  test('every SDK sample type-checks under tsc --strict and runs', { timeout: 240_000 }, async () => {
    const modules = Object.fromEntries(
      check.operations().flatMap((operation) => {
        const source = sourceOf(operation, 'TypeScript SDK');
        return source === undefined ? [] : [[operation.operationId, source]];
      }),
    );
    await typeCheck(modules, examples);
    for (const [name, source] of Object.entries(modules)) {
      const { stdout, stderr } = await runTypeScript(name, source, examples);
      assert.equal(stderr, '', name);
      assert.ok(stdout.length > 0, `${name} printed something`);
    }
  });
});
