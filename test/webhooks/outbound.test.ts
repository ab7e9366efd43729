import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { InputError } from '../../src/errors.ts';
import { retryWaitMs } from '../../src/webhooks/retry.ts';
import { addressProblem, OutboundClient, type Resolver, retryAfterMs } from '../../src/webhooks/outbound.ts';
import { blockAfterNextWriteTo } from '../faults/busy-loop.ts';
import { Receiver } from './receiver.ts';

const resolverOf =
  (table: Record<string, string[]>): Resolver =>
  async (hostname) => {
    const addresses = table[hostname];
    if (addresses === undefined)
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };

describe('the outbound guard: which addresses may be dialled', () => {
  test('only public unicast addresses pass', () => {
    const refused = [
      '127.0.0.1',
      '127.8.9.10',
      '::1',
      '10.0.0.1',
      '172.16.5.4',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '::',
      '224.0.0.1',
      'ff02::1',
      '255.255.255.255',
      'fc00::1',
      'fd12:3456::1',
      'fe80::1',
      '::ffff:127.0.0.1',
      '::ffff:10.0.0.1',
      '::ffff:169.254.169.254',
      '2002:7f00:1::1',
      '64:ff9b::7f00:1',
      // IPv4-compatible (deprecated) forms of loopback and cloud metadata, and other addresses
      // outside IPv6's global unicast 2000::/3.
      '::127.0.0.1',
      '::a9fe:a9fe',
      '::7f00:1',
      '100::1',
      '4000::1',
      'e000::1',
      // Inside 2000::/3 but special: documentation, benchmarking, Teredo.
      '2001:db8::1',
      '2001:2::1',
      '2001::1',
    ];
    for (const address of refused)
      assert.notEqual(addressProblem(address), null, `${address} must be refused`);
    for (const address of ['93.184.215.14', '8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8'])
      assert.equal(addressProblem(address), null, `${address} is public`);
    assert.match(addressProblem('169.254.169.254') ?? '', /link-local/);
    assert.match(addressProblem('100.64.0.1') ?? '', /carrier-grade NAT/);
    assert.match(addressProblem('::a9fe:a9fe') ?? '', /not global unicast \(2000::\/3\)/);
  });
});

describe('the outbound guard: URLs at creation', () => {
  const client = new OutboundClient({
    allowPrivate: false,
    timeoutMs: 1000,
    resolve: resolverOf({
      localhost: ['127.0.0.1', '::1'],
      'hooks.example': ['93.184.215.14'],
      'mixed.example': ['93.184.215.14', '10.1.2.3'],
    }),
  });
  after(() => client.close());

  test('refused with one clear line: loopback, IPv6 loopback, cloud metadata, RFC 1918, localhost, http, credentials, port 0', async () => {
    const cases: [string, RegExp][] = [
      ['https://127.0.0.1/hook', /^url refused: 127\.0\.0\.1 \(loopback\) is not a public address/],
      ['https://[::1]/hook', /^url refused: ::1 \(loopback\)/],
      ['https://169.254.169.254/latest/meta-data', /^url refused: 169\.254\.169\.254 \(link-local\)/],
      ['https://10.0.0.1/hook', /^url refused: 10\.0\.0\.1 \(RFC 1918 private\)/],
      ['https://localhost/hook', /^url refused: "localhost" resolves to 127\.0\.0\.1 \(loopback\)/],
      ['https://mixed.example/hook', /^url refused: "mixed\.example" resolves to 10\.1\.2\.3/],
      ['https://[::ffff:7f00:1]/hook', /^url refused: ::ffff:7f00:1 \(/],
      ['https://nowhere.example/hook', /^url refused: its host "nowhere\.example" does not resolve$/],
      ['http://hooks.example/hook', /^url must start with https:\/\/ .*WEBHOOKS_ALLOW_PRIVATE=true$/],
      ['https://user:pass@hooks.example/hook', /^url must not carry credentials/],
      ['https://hooks.example:0/hook', /^url must not name port 0/],
      ['hooks.example/hook', /^url must be an absolute https:\/\/ URL/],
    ];
    for (const [url, message] of cases) {
      await assert.rejects(client.checkUrl(url), (error: unknown) => {
        assert.ok(error instanceof InputError, url);
        assert.match(error.message, message, url);
        assert.ok(!error.message.includes('\n'), 'one line');
        return true;
      });
    }
    assert.equal(await client.checkUrl('https://hooks.example/hook?x=1'), 'https://hooks.example/hook?x=1');
  });

  test('WEBHOOKS_ALLOW_PRIVATE allows http:// and private addresses', async () => {
    const open = new OutboundClient({ allowPrivate: true, timeoutMs: 1000 });
    assert.equal(await open.checkUrl('http://127.0.0.1:9/hook'), 'http://127.0.0.1:9/hook');
    assert.equal(await open.checkUrl('http://localhost/hook'), 'http://localhost/hook');
    await assert.rejects(open.checkUrl('ftp://127.0.0.1/'), /url must start with https:\/\/ or http:\/\//);
    await assert.rejects(open.checkUrl('http://127.0.0.1:0/hook'), /url must not name port 0/);
    await open.close();
  });
});

describe('the outbound guard: at delivery, on the address dialled', () => {
  let receiver: Receiver;
  before(async () => {
    receiver = await Receiver.start();
  });
  after(() => receiver.close());

  test('an address in the URL is refused before any connection', async () => {
    const client = new OutboundClient({ allowPrivate: false, timeoutMs: 1000 });
    const before = receiver.connections;
    // http:// cannot be created without the flag; the guard is checked here on its own.
    const result = await client.post(receiver.url(), {}, '{}');
    assert.equal(result.status, null);
    assert.match(
      result.error ?? '',
      /^refused, not connected: 127\.0\.0\.1 \(loopback\) is not a public address$/,
    );
    assert.equal(receiver.connections, before, 'never connected');
    await client.close();
  });

  test('DNS rebinding: a name that resolved to a public address at creation and to loopback now is refused, never connected', async () => {
    let answer = ['93.184.215.14'];
    const client = new OutboundClient({
      allowPrivate: false,
      timeoutMs: 1000,
      resolve: async () => answer.map((address) => ({ address, family: 4 })),
    });
    assert.equal(await client.checkUrl('https://rebind.example/hook'), 'https://rebind.example/hook');
    answer = ['127.0.0.1'];
    const before = receiver.connections;
    const result = await client.post(`http://rebind.example:${receiver.port}/hook`, {}, '{}');
    assert.equal(result.status, null);
    assert.match(
      result.error ?? '',
      /^refused, not connected: "rebind\.example" resolves to 127\.0\.0\.1 \(loopback\)/,
    );
    assert.equal(receiver.connections, before, 'never connected');
    await client.close();
  });

  test('a redirect is not followed: the 3xx is the answer, and its target is never asked', async () => {
    const target = await Receiver.start();
    receiver.answer = (_received, response) => {
      response.writeHead(302, { location: target.url('/elsewhere') });
      response.end('moved');
    };
    const client = new OutboundClient({ allowPrivate: true, timeoutMs: 1000 });
    const result = await client.post(receiver.url(), {}, '{}');
    assert.equal(result.status, 302);
    assert.match(result.error ?? '', /^HTTP 302/);
    assert.equal(target.received.length, 0);
    assert.equal(target.connections, 0);
    await client.close();
    await target.close();
  });

  test('a receiver slower than the timeout fails the attempt at the timeout', async () => {
    receiver.answer = (_received, response) => {
      setTimeout(() => response.end(), 3000).unref();
    };
    const client = new OutboundClient({ allowPrivate: true, timeoutMs: 300 });
    const result = await client.post(receiver.url(), {}, '{}');
    assert.equal(result.status, null);
    assert.equal(result.error, 'no answer within 300 ms');
    assert.ok(result.durationMs >= 290 && result.durationMs < 2000, `${result.durationMs} ms`);
    await client.close();
  });

  test('an answer that came in time while the event loop was busy past the timeout is a success, not a timeout', async () => {
    // The receiver is another process: it answers while this one is held busy, and says so in a
    // file once its answer has left.
    const dir = mkdtempSync(join(tmpdir(), 'outbound-busy-'));
    const answered = join(dir, 'answered');
    const child = spawn(
      process.execPath,
      [
        '-e',
        `const server = require('node:http').createServer((request, response) => {
           request.resume();
           request.on('end', () => response.end(() => require('node:fs').writeFileSync(process.argv[1], '')));
         });
         server.listen(0, '127.0.0.1', () => console.log(server.address().port));`,
        answered,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      const [line] = (await once(child.stdout, 'data')) as [Buffer];
      const port = Number(line.toString().trim());
      const client = new OutboundClient({ allowPrivate: true, timeoutMs: 300 });
      // Held once the request's body is written: the answer arrives meanwhile, but is read only
      // after the timeout's timer is due (a starved process, a long synchronous piece of work).
      const body = '{"the":"body"}';
      const held = blockAfterNextWriteTo(port, 800, {
        matching: (data) => String(data).endsWith(body),
        flushed: true,
        alsoUntil: () => existsSync(answered),
      });
      const result = await client.post(`http://127.0.0.1:${port}/hook`, {}, body);
      assert.ok((await held) >= 800);
      assert.deepEqual([result.status, result.error], [200, null]);
      await client.close();
    } finally {
      child.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('at most 64 KiB of an answer is read: a receiver that streams without end does not hold the attempt', async () => {
    let closedByClient = false;
    receiver.answer = (_received, response) => {
      response.writeHead(200);
      const chunk = Buffer.alloc(16 * 1024, 'x');
      response.on('close', () => {
        closedByClient = true;
      });
      // Never ends: only the client going away stops it.
      const write = () => {
        while (!response.destroyed && response.write(chunk));
        if (!response.destroyed) response.once('drain', write);
      };
      write();
    };
    const client = new OutboundClient({ allowPrivate: true, timeoutMs: 5000 });
    const result = await client.post(receiver.url(), {}, '{}');
    assert.equal(result.status, 200);
    assert.equal(result.error, null);
    assert.ok(
      result.durationMs < 2000,
      `${result.durationMs} ms: it stopped reading, it did not wait for the timeout`,
    );
    await client.close();
    for (let i = 0; i < 50 && !closedByClient; i += 1)
      await new Promise((resolve) => setTimeout(resolve, 20));
    assert.ok(closedByClient, 'the connection was closed by the client');
  });

  test('the answer is kept for the delivery log: its headers and the first 4 KiB of its body, as text both stores hold', async () => {
    const client = new OutboundClient({ allowPrivate: true, timeoutMs: 5000 });
    try {
      // 4,094 bytes, a NUL, then a two-byte character cut by the 4 KiB mark, then more.
      const body = Buffer.concat([
        Buffer.alloc(4094, 'a'),
        Buffer.from([0]),
        Buffer.from('é', 'utf8'),
        Buffer.alloc(20_000, 'b'),
      ]);
      receiver.answer = (_received, response) => {
        response.setHeader('x-trace', ['t1', 't2']);
        response.setHeader('content-type', 'text/plain');
        response.statusCode = 422;
        response.end(body);
      };
      const result = await client.post(receiver.url(), {}, '{}');
      assert.equal(result.status, 422);
      assert.equal(result.response?.body, `${'a'.repeat(4094)}\ufffd`, 'the first 4 KiB, NUL replaced');
      assert.deepEqual(result.response?.headers['x-trace'], ['t1', 't2'], 'a repeated header, each value');
      assert.equal(result.response?.headers['content-type'], 'text/plain');
      assert.equal(result.error, `HTTP 422: ${'a'.repeat(200)}`, 'the error quotes 200 characters');

      receiver.answer = (_received, response) => {
        response.statusCode = 204;
        response.end();
      };
      const empty = await client.post(receiver.url(), {}, '{}');
      assert.equal(empty.response?.body, '');
      assert.equal(typeof empty.response?.headers.date, 'string');

      const closed = await Receiver.start();
      const url = closed.url();
      await closed.close();
      assert.equal((await client.post(url, {}, '{}')).response, null, 'no answer, nothing kept');
    } finally {
      await client.close();
    }
  });
});

describe('Retry-After', () => {
  test('read as seconds or an HTTP date from the answer; a date past is 0; anything else is not heeded', () => {
    const now = Date.parse('2026-11-28T06:00:00Z');
    assert.equal(retryAfterMs('12', now), 12_000);
    assert.equal(retryAfterMs(' 0 ', now), 0);
    assert.equal(retryAfterMs('Sat, 28 Nov 2026 06:00:40 GMT', now), 40_000);
    assert.equal(retryAfterMs('Sat, 28 Nov 2026 05:00:00 GMT', now), 0);
    assert.equal(retryAfterMs(['7', '9'], now), 7000);
    for (const bad of [undefined, '', '-5', '1.5', 'soon', '12 s'])
      assert.equal(retryAfterMs(bad, now), null, JSON.stringify(bad));
  });

  test('the wait: the schedule, or what was asked when longer, at most an hour past the schedule', () => {
    const middle = () => 0.5; // no jitter: the first step is 5 s exactly
    assert.equal(retryWaitMs(1, null, middle), 5000);
    assert.equal(retryWaitMs(1, 1000, middle), 5000);
    assert.equal(retryWaitMs(1, 12_000, middle), 12_000);
    assert.equal(retryWaitMs(1, 86_400_000, middle), 5000 + 3_600_000);
    assert.equal(retryWaitMs(2, 60_000, middle), 300_000, 'the second step (5 min) is already longer');
  });
});
