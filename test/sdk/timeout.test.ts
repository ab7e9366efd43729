import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, type TestContext, test } from 'node:test';
import {
  type ClientOptions,
  createClient,
  type Fetch,
  SafetyApiError,
  TimeoutError,
} from '../../packages/sdk/src/index.ts';

/**
 * The SDK's `timeout` against a server that answers only when the test says so. The timeout is a
 * rule about time, so it runs on a controlled clock (`mock.timers`): no attempt times out before
 * its request has reached the server, however busy the machine, and none before the test moves
 * the clock past the timeout. Everything else is waited for as an event: a request arriving, an
 * attempt failing, a call settling, a held request being closed by the client.
 */

/** Things that happen one after another, each waited for by its number (1 is the first). */
class Events<T> {
  readonly #seen: T[] = [];
  readonly #waiting: { count: number; resolve: (item: T) => void }[] = [];

  add(item: T): void {
    this.#seen.push(item);
    for (const waiter of [...this.#waiting]) {
      if (this.#seen.length < waiter.count) continue;
      this.#waiting.splice(this.#waiting.indexOf(waiter), 1);
      waiter.resolve(this.#seen[waiter.count - 1]!);
    }
  }

  get count(): number {
    return this.#seen.length;
  }

  nth(count: number): Promise<T> {
    if (this.#seen.length >= count) return Promise.resolve(this.#seen[count - 1]!);
    return new Promise((resolve) => this.#waiting.push({ count, resolve }));
  }
}

interface Held {
  request: IncomingMessage;
  response: ServerResponse;
  /** Resolves once the client has closed the connection (it aborted the request). */
  closed: Promise<void>;
}

const JSON_HEADERS = { 'content-type': 'application/json', 'x-request-id': 'req_stub' };
const USERS_BODY = JSON.stringify({ error: false, data: [] });

/** The longest backoff after a first failed attempt: 250 ms, jittered by up to half again. */
const FIRST_BACKOFF_MAX_MS = 375;

/**
 * A server that hands every request to the test, held, after `onRequest` (which may answer it or
 * begin to); and a `fetch` for the client that reports each attempt's headers and failures.
 */
async function holdingServer(onRequest: (held: Held, count: number) => void = () => {}) {
  const requests = new Events<Held>();
  const server = createServer((request, response) => {
    const held = { request, response, closed: once(response, 'close').then(() => {}) };
    onRequest(held, requests.count + 1);
    requests.add(held);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const answered = new Events<Response>();
  const failed = new Events<unknown>();
  const fetching: Fetch = async (request) => {
    try {
      const response = await fetch(request);
      answered.add(response);
      return response;
    } catch (error) {
      failed.add(error);
      throw error;
    }
  };
  return {
    client: (options: Partial<ClientOptions>) =>
      createClient({ baseUrl, apiKey: `svc_${'a'.repeat(40)}`, fetch: fetching, ...options }),
    requests,
    /** Attempts whose answer's headers came. */
    answered,
    /** Attempts that failed: timed out, aborted or refused. */
    failed,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

/** After every callback that is due now has run: what a resolved promise leads to, at once. */
const settledNow = () => new Promise((resolve) => setImmediate(resolve));

/** Whether `call` has settled by now (without waiting for it). */
async function isSettled(call: Promise<unknown>): Promise<boolean> {
  let settled = false;
  call.then(
    () => {
      settled = true;
    },
    () => {
      settled = true;
    },
  );
  await settledNow();
  return settled;
}

/** The rejection of `call`, which must reject. */
async function rejection(call: Promise<unknown>): Promise<unknown> {
  return call.then(
    (value) => assert.fail(`expected a rejection, got ${JSON.stringify(value)}`),
    (error: unknown) => error,
  );
}

describe('SDK timeout', () => {
  const servers: { close(): Promise<unknown> }[] = [];
  const started = async (onRequest?: (held: Held, count: number) => void) => {
    const server = await holdingServer(onRequest);
    servers.push(server);
    return server;
  };
  after(() => Promise.all(servers.map((server) => server.close())));

  test('no answer in time: a TimeoutError (not a SafetyApiError), and the request is aborted', async (t: TestContext) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const server = await started();
    const call = server.client({ timeout: 100, retry: false }).listUsers();
    const held = await server.requests.nth(1);
    t.mock.timers.tick(99);
    assert.equal(await isSettled(call), false, 'not before the timeout');
    t.mock.timers.tick(1);
    const error = await rejection(call);
    assert.ok(error instanceof TimeoutError, String(error));
    assert.ok(!(error instanceof SafetyApiError), 'no answer came: not an API error');
    assert.equal(error.name, 'TimeoutError');
    assert.equal(error.timeout, 100);
    assert.equal(error.attempts, 1);
    assert.match(
      error.message,
      /^GET http:\/\/127\.0\.0\.1:\d+\/api\/v1\/public\/users: no answer within the 100 ms timeout$/,
    );
    // The client gave up on the request: its connection is closed, not left open.
    await held.closed;
    assert.equal(server.failed.count, 1, 'retry: false: one attempt');
  });

  test("the client's timeout, overridden by a call's: a longer one (or none) waits on, a shorter one gives up", async (t: TestContext) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const server = await started();
    const client = server.client({ timeout: 100, retry: false });
    const patient = client.listUsers({ timeout: false });
    const first = await server.requests.nth(1);
    assert.equal(first.request.url, '/api/v1/public/users');
    const hasty = client.listDepartments();
    await server.requests.nth(2);
    t.mock.timers.tick(100);
    const error = await rejection(hasty);
    assert.ok(error instanceof TimeoutError && error.timeout === 100, String(error));
    t.mock.timers.tick(3_600_000);
    assert.equal(await isSettled(patient), false, 'timeout: false waits as long as it takes');
    first.response.writeHead(200, JSON_HEADERS).end(USERS_BODY);
    const answered = await patient;
    assert.deepEqual(answered.data, []);
    assert.equal(answered.requestId, 'req_stub');

    const shorter = server.client({ timeout: 60_000, retry: false }).listLocations({ timeout: 50 });
    await server.requests.nth(3);
    t.mock.timers.tick(50);
    const shortError = await rejection(shorter);
    assert.ok(shortError instanceof TimeoutError && shortError.timeout === 50, String(shortError));
  });

  test('headers in time but a body that stalls: a timeout too', async (t: TestContext) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const server = await started(({ response }) => {
      response.writeHead(200, JSON_HEADERS);
      response.write('{"error":false,');
    });
    const call = server.client({ timeout: 100, retry: false }).listUsers();
    await server.answered.nth(1);
    t.mock.timers.tick(100);
    assert.ok((await rejection(call)) instanceof TimeoutError);
  });

  test('a timed-out attempt is retried like a network failure: the next answer is returned', async (t: TestContext) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    // The first attempt is held until it times out; the next one is answered.
    const server = await started(({ response }, count) => {
      if (count > 1) response.writeHead(200, JSON_HEADERS).end(USERS_BODY);
    });
    const call = server.client({ timeout: 100 }).listUsers();
    const first = await server.requests.nth(1);
    t.mock.timers.tick(100);
    await first.closed;
    // The attempt failed; the wait before the next one has begun.
    await server.failed.nth(1);
    await settledNow();
    t.mock.timers.tick(FIRST_BACKOFF_MAX_MS);
    assert.deepEqual((await call).data, []);
    assert.equal(server.requests.count, 2);
  });

  test('every attempt timed out: a TimeoutError that counts them', async (t: TestContext) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const server = await started();
    const call = server.client({ timeout: 50, retry: { maxAttempts: 2 } }).listUsers();
    await server.requests.nth(1);
    t.mock.timers.tick(50);
    await server.failed.nth(1);
    await settledNow();
    t.mock.timers.tick(FIRST_BACKOFF_MAX_MS);
    await server.requests.nth(2);
    t.mock.timers.tick(50);
    const error = await rejection(call);
    assert.ok(error instanceof TimeoutError, String(error));
    assert.equal(error.attempts, 2);
    assert.match(error.message, /no answer within the 50 ms timeout \(2 attempts\)$/);
    assert.equal(server.requests.count, 2);
  });

  test("an export's timeout ends with its headers: a body slower than it streams on", async (t: TestContext) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const server = await started(({ response }) => {
      response.writeHead(200, {
        'content-type': 'application/x-ndjson; charset=utf-8',
        'x-changes-cursor': 'cursor-1',
      });
      response.write(`${JSON.stringify({ incident_number: 'INC-1' })}\n`);
    });
    const exported = await server.client({ timeout: 100, retry: false }).exportIncidents();
    assert.equal(exported.cursor, 'cursor-1');
    const rows = exported[Symbol.asyncIterator]();
    assert.deepEqual((await rows.next()).value, { incident_number: 'INC-1' });
    t.mock.timers.tick(60_000);
    const held = await server.requests.nth(1);
    assert.equal(held.request.url, '/api/v1/public/exports/incidents.ndjson');
    held.response.end(`${JSON.stringify({ incident_number: 'INC-2' })}\n`);
    assert.deepEqual(await rows.next(), { done: false, value: { incident_number: 'INC-2' } });
    assert.deepEqual(await rows.next(), { done: true, value: undefined });
  });

  test('aborting a call that waits for its answer rejects with the abort, not a timeout', async () => {
    const server = await started();
    const controller = new AbortController();
    const call = server.client({ timeout: 60_000 }).listUsers({ signal: controller.signal });
    const held = await server.requests.nth(1);
    controller.abort();
    await assert.rejects(call, { name: 'AbortError' });
    await held.closed;
    assert.equal(server.requests.count, 1, 'an aborted call is not retried');
  });

  test('a timeout that is not milliseconds above 0 (or false) is refused, saying what is expected', async () => {
    for (const timeout of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31])
      assert.throws(
        () => createClient({ baseUrl: 'https://safety.example.com', apiKey: 'svc_x', timeout }),
        /timeout must be a number of milliseconds above 0 and at most 2147483647, or false for none/,
        String(timeout),
      );
    const server = await started();
    await assert.rejects(server.client({}).listUsers({ timeout: -5 }), TypeError);
    assert.equal(server.failed.count + server.answered.count, 0, 'nothing was sent');
  });
});
