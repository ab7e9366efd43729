import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, test } from 'node:test';
import {
  createClient,
  type RetryOptions,
  SafetyApiError,
  ServiceUnavailableError,
} from '../../packages/sdk/src/index.ts';

/**
 * The SDK's retries against a stub that answers from a script: 429 and 503 sequences the real
 * server would need an hour's allowance or a failing database for. The real server's 429 is in
 * client.test.ts.
 */

interface Answer {
  status: number;
  headers?: Record<string, string>;
  body: string;
}

const USERS: Answer = {
  status: 200,
  headers: {
    'content-type': 'application/json',
    'x-ratelimit-limit': '1000',
    'x-ratelimit-remaining': '998',
    'x-ratelimit-reset': '1795600000',
    'x-request-id': 'req_stub',
  },
  body: JSON.stringify({ error: false, data: [] }),
};
const limited = (retryAfter: string): Answer => ({
  status: 429,
  headers: {
    'content-type': 'application/json',
    'retry-after': retryAfter,
    'x-ratelimit-limit': '1000',
    'x-ratelimit-remaining': '0',
  },
  body: JSON.stringify({ error: 'RATE_LIMIT_EXCEEDED', message: 'Rate limit exceeded' }),
});
const unavailable = (retryAfter: string): Answer => ({
  status: 503,
  headers: { 'content-type': 'application/json', 'retry-after': retryAfter },
  body: JSON.stringify({ error: true, message: 'Service temporarily unavailable' }),
});

/** No answer: the connection is closed under the request. */
const RESET: Answer = { status: 0, body: '' };

/** Answers each request with the next answer of the script, and with the last one once it ran out. */
async function stub(script: Answer[]) {
  let requests = 0;
  const server = createServer((request, response) => {
    const answer = script[Math.min(requests, script.length - 1)]!;
    requests += 1;
    // A connection reset before any answer, as an instance that restarts gives.
    if (answer === RESET) request.socket.destroy();
    else response.writeHead(answer.status, answer.headers).end(answer.body);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    client: (retry?: RetryOptions | false) =>
      createClient({
        baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        apiKey: `svc_${'a'.repeat(40)}`,
        ...(retry === undefined ? {} : { retry }),
      }),
    requests: () => requests,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/** Runs `call` and says how long it took, in milliseconds. */
async function timed<T>(call: () => Promise<T>): Promise<{ result: T; ms: number }> {
  const started = performance.now();
  const result = await call();
  return { result, ms: performance.now() - started };
}

describe('SDK retries', () => {
  const stubs: { close(): Promise<unknown> }[] = [];
  const started = async (script: Answer[]) => {
    const server = await stub(script);
    stubs.push(server);
    return server;
  };
  after(() => Promise.all(stubs.map((server) => server.close())));

  test('a 429 then a success: retried after Retry-After, the success returned with its headers', async () => {
    const server = await started([limited('1'), USERS]);
    const { result, ms } = await timed(() => server.client().listUsers());
    assert.deepEqual(result.data, []);
    assert.deepEqual(result.rateLimit, { limit: 1000, remaining: 998, reset: 1795600000 });
    assert.equal(result.requestId, 'req_stub');
    assert.equal(server.requests(), 2);
    assert.ok(ms >= 950, `waited ${ms} ms`);
  });

  test('a connection reset, then another, then a success: retried after a short backoff', async () => {
    const server = await started([RESET, RESET, USERS]);
    const { result } = await timed(() => server.client().listUsers());
    assert.deepEqual(result.data, []);
    assert.equal(server.requests(), 3);
  });

  test('network failures past maxAttempts, or with retry: false, reject as fetch does', async () => {
    const always = await started([RESET]);
    await assert.rejects(always.client({ maxAttempts: 2 }).listUsers(), TypeError);
    assert.equal(always.requests(), 2);
    const single = await started([RESET, USERS]);
    await assert.rejects(single.client(false).listUsers(), TypeError);
    assert.equal(single.requests(), 1, 'retry: false sends once');
  });

  test('a 503 then a success: retried', async () => {
    const server = await started([unavailable('1'), USERS]);
    assert.deepEqual((await server.client().listUsers()).data, []);
    assert.equal(server.requests(), 2);
  });

  test('attempts used up: the last answer as a typed error', async () => {
    const server = await started([limited('1')]);
    const error = await server
      .client({ maxAttempts: 2 })
      .listUsers()
      .catch((caught: unknown) => caught);
    assert.ok(error instanceof SafetyApiError);
    assert.equal(error.status, 429);
    assert.equal(error.code, 'RATE_LIMIT_EXCEEDED');
    assert.equal(error.message, 'Rate limit exceeded');
    assert.equal(error.retryAfter, 1);
    assert.deepEqual(error.rateLimit, { limit: 1000, remaining: 0, reset: null });
    assert.equal(server.requests(), 2);
  });

  test('waiting time used up: no wait past maxWaitMs', async () => {
    const server = await started([unavailable('1')]);
    const { result: error, ms } = await timed(() =>
      server
        .client({ maxAttempts: 10, maxWaitMs: 1500 })
        .listDepartments()
        .catch((caught: unknown) => caught),
    );
    assert.ok(error instanceof SafetyApiError);
    assert.ok(error instanceof ServiceUnavailableError, error.name);
    assert.equal(error.status, 503);
    assert.equal(error.code, null);
    assert.equal(error.message, 'Service temporarily unavailable');
    // One wait of a second fits in 1.5 s, a second one would not.
    assert.equal(server.requests(), 2);
    assert.ok(ms < 1500, `took ${ms} ms`);
  });

  test('a Retry-After beyond the budget is reported at once, not waited for', async () => {
    const server = await started([limited('3600')]);
    const { result: error, ms } = await timed(() =>
      server
        .client()
        .listLocations()
        .catch((caught: unknown) => caught),
    );
    assert.ok(error instanceof SafetyApiError);
    assert.equal(error.retryAfter, 3600);
    assert.equal(server.requests(), 1);
    assert.ok(ms < 1000, `took ${ms} ms`);
  });

  test('aborting ends a wait at once, with the signal’s reason', async () => {
    const server = await started([limited('30')]);
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const { result: error, ms } = await timed(() =>
      server
        .client({ maxWaitMs: 60_000 })
        .listIncidents({}, { signal: controller.signal })
        .catch((caught: unknown) => caught),
    );
    assert.ok(error instanceof Error);
    assert.equal(error.name, 'AbortError');
    assert.equal(server.requests(), 1);
    assert.ok(ms < 2000, `took ${ms} ms`);
  });

  test('an already aborted signal sends nothing', async () => {
    const server = await started([USERS]);
    await assert.rejects(server.client().listUsers({ signal: AbortSignal.abort() }), { name: 'AbortError' });
    assert.equal(server.requests(), 0);
  });

  test('retry: false reports a 429 at once', async () => {
    const server = await started([limited('1'), USERS]);
    await assert.rejects(server.client(false).listUsers(), { status: 429, code: 'RATE_LIMIT_EXCEEDED' });
    assert.equal(server.requests(), 1);
  });

  test('an answer that is not the API’s JSON is still a SafetyApiError, without a code', async () => {
    const server = await started([
      { status: 502, headers: { 'content-type': 'text/html' }, body: '<h1>Bad gateway</h1>' },
    ]);
    const error = await server
      .client()
      .listUsers()
      .catch((caught: unknown) => caught);
    assert.ok(error instanceof SafetyApiError);
    assert.equal(error.status, 502);
    assert.equal(error.code, null);
    assert.equal(error.message, 'HTTP 502');
    assert.equal(server.requests(), 1);
  });
});
