import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { OAuthClient, SafetyClient } from '../../packages/sdk/src/index.ts';
import { codeSamples } from '../../src/openapi/code-samples.ts';
import { INCIDENT_EXAMPLE } from '../../src/schemas/public.ts';
import { DocumentCheck, type Operation } from './document-check.ts';
import {
  type ExampleServer,
  runShell,
  runTypeScriptModules,
  startExampleServer,
  typeCheck,
} from './examples.ts';

// The request samples of /openapi.json (`x-codeSamples`, which /docs shows with each operation):
// curl and the TypeScript SDK for every operation, every one of them run against a real server as
// a reader would paste it.

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

/** The SDK's clients, by the name each sample gives its own. */
const CLIENTS = { client: SafetyClient.prototype, oauth: OAuthClient.prototype };

/** The SDK's methods a sample calls (`client.listIncidents(`, `oauth.getJwks(`), by client. */
const sdkCalls = (source: string): { client: keyof typeof CLIENTS; method: string }[] =>
  [...source.matchAll(/\b(client|oauth)\.(\w+)\(/g)].map(([, client = '', method = '']) => ({
    client: client as keyof typeof CLIENTS,
    method,
  }));

/** The operations whose SDK method is named otherwise: what the SDK does in their place. */
const SDK_METHODS: Record<string, string> = {
  // A URL for the browser, built without a request.
  authorize: 'authorizationUrl',
  endSession: 'endSessionUrl',
  // The grant of the curl sample; `exchangeCode` is the authorization code's.
  createToken: 'clientCredentialsToken',
  // The SDK asks with GET, the token in the header.
  getUserInfoByPost: 'getUserInfo',
};

/** The SDK's method for an operation: the CSV exports share the NDJSON export's method. */
const sdkMethodOf = (operationId: string): string =>
  SDK_METHODS[operationId] ?? operationId.replace(/Csv$/, '');

/**
 * The order the samples run in: the refresh spends the refresh token, and revoking it ends the
 * grant of the access token the others use, so those two come last.
 */
const LAST = ['refreshToken', 'revokeToken'];
const runOrder = (a: Operation, b: Operation) => LAST.indexOf(a.operationId) - LAST.indexOf(b.operationId);

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

  test('every operation has curl first, then the TypeScript SDK', () => {
    const operations = check.operations();
    assert.ok(operations.length >= 30, 'the document has the operations');
    for (const operation of operations) {
      assert.deepEqual(
        samplesOf(operation).map(({ lang, label }) => [lang, label]),
        [
          ['curl', 'curl'],
          ['TypeScript', 'TypeScript SDK'],
        ],
        operation.operationId,
      );
      const curl = sourceOf(operation, 'curl') ?? '';
      assert.match(curl, /^curl /, operation.operationId);
      const url = `${baseUrl}${operation.path.replace('{id}', INCIDENT_EXAMPLE.id)}`;
      assert.ok(curl.includes(`"${url}`), `${operation.operationId} asks for ${url}:\n${curl}`);
    }
  });

  test('every operation has an SDK sample, which calls the operation’s method, and only methods the clients have', () => {
    const operations = check.operations();
    for (const operation of operations) {
      const source = sourceOf(operation, 'TypeScript SDK');
      assert.ok(source !== undefined, `${operation.operationId} has an SDK sample`);
      assert.match(source, /from '@safety-incident\/sdk';/, operation.operationId);
      const calls = sdkCalls(source);
      assert.ok(
        calls.some(({ method }) => method === sdkMethodOf(operation.operationId)),
        `${operation.operationId}: ${calls.map(({ method }) => method).join(', ')}`,
      );
      for (const { client, method } of calls) {
        assert.equal(typeof Reflect.get(CLIENTS[client], method), 'function', `${client} has ${method}()`);
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
    await examples.renewTokens();
    for (const operation of check.operations().sort(runOrder)) {
      const { stdout } = await runShell(sourceOf(operation, 'curl') ?? '', examples);
      assert.ok(stdout.length > 0, `${operation.operationId} printed something`);
    }
  });

  test('every SDK sample type-checks under tsc --strict and runs', { timeout: 240_000 }, async () => {
    const modules = Object.fromEntries(
      check
        .operations()
        .sort(runOrder)
        .map((operation) => [operation.operationId, sourceOf(operation, 'TypeScript SDK') ?? '']),
    );
    await examples.renewTokens();
    await typeCheck(modules, examples);
    const ran = await runTypeScriptModules(modules, examples);
    assert.deepEqual(Object.keys(ran), Object.keys(modules));
    for (const [name, { stdout, stderr }] of Object.entries(ran)) {
      assert.equal(stderr, '', name);
      assert.ok(stdout.length > 0, `${name} printed something`);
    }
  });
});
