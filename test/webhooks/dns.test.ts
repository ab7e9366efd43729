import assert from 'node:assert/strict';
import { scrypt } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { InputError } from '../../src/errors.ts';
import { parseHostsFile } from '../../src/webhooks/dns.ts';
import { OutboundClient, type PostResult } from '../../src/webhooks/outbound.ts';
import { until } from '../wait.ts';
import { SilentDns } from './dns-server.ts';
import { Receiver } from './receiver.ts';

/**
 * Host names of webhook receivers are looked up through c-ares, off libuv's thread pool, within a
 * deadline and with a bound on the lookups in flight (issue 41, "DNS on the thread pool"). The DNS
 * server here reads every query and never answers.
 */

describe('webhook DNS lookups: off the thread pool, within a deadline', () => {
  let dns: SilentDns;
  let dir: string;
  let hostsFile: string;
  before(async () => {
    dns = await SilentDns.start();
    dir = mkdtempSync(join(tmpdir(), 'webhook-dns-'));
    hostsFile = join(dir, 'hosts');
    writeFileSync(hostsFile, '# a hosts file\n93.184.215.14  hooks.listed.example  alias.example # public\n');
  });
  after(() => {
    dns.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a DNS server that never answers: 8 lookups hang at once while scrypt and a file read complete on the thread pool; each attempt then fails at the deadline, saying so', async () => {
    const deadlineMs = 4000;
    const client = new OutboundClient({
      allowPrivate: false,
      timeoutMs: 1000,
      connectWithinMs: 60_000,
      dns: { servers: [dns.server], deadlineMs, hostsFile: null },
    });
    try {
      // Twice the thread pool's 4 threads: getaddrinfo would hold all of them.
      const names = Array.from({ length: 8 }, (_, i) => `hang-${i}.example`);
      let settled = 0;
      const posts = names.map((name) =>
        client.post(`https://${name}/hook`, {}, '{}').finally(() => {
          settled += 1;
        }),
      );
      await until(
        () => names.every((name) => dns.asked.has(name)),
        10_000,
        () => `the DNS server asked for all 8 names (asked: ${[...dns.asked.keys()].join(', ') || 'none'})`,
      );
      const key = await new Promise<Buffer>((resolve, reject) =>
        scrypt('a password', 'some salt', 32, { N: 1024 }, (error, derived) =>
          error === null ? resolve(derived) : reject(error),
        ),
      );
      assert.equal(key.length, 32);
      assert.ok((await readFile(hostsFile, 'utf8')).includes('hooks.listed.example'));
      assert.equal(settled, 0, 'the thread pool did its work while every lookup was still waiting');

      const results: PostResult[] = await Promise.all(posts);
      results.forEach((result, i) => {
        assert.equal(result.status, null);
        assert.equal(result.failure, 'network_error');
        assert.equal(result.error, `DNS: no DNS answer for "hang-${i}.example" within ${deadlineMs} ms`);
        // The deadline, with room for a busy machine's timers.
        assert.ok(
          result.durationMs >= deadlineMs - 50 && result.durationMs < deadlineMs + 3000,
          `${result.durationMs} ms`,
        );
      });
    } finally {
      await client.close();
    }
  });

  test('at most maxLookups lookups at once: the others wait for a turn, within their own deadline', async () => {
    const deadlineMs = 1500;
    const client = new OutboundClient({
      allowPrivate: false,
      timeoutMs: 1000,
      connectWithinMs: 60_000,
      dns: { servers: [dns.server], deadlineMs, maxLookups: 2, hostsFile: null },
    });
    try {
      const started = performance.now();
      const first = ['turn-0.example', 'turn-1.example'];
      const firstPosts = first.map((name) => client.post(`https://${name}/hook`, {}, '{}'));
      await until(() => first.every((name) => dns.asked.has(name)), 10_000, 'the first 2 lookups asked');
      const more = ['turn-2.example', 'turn-3.example', 'turn-4.example'];
      const results = await Promise.all([
        ...firstPosts,
        ...more.map((name) => client.post(`https://${name}/hook`, {}, '{}')),
      ]);
      // The other three waited for the first two to end (at their deadline) before asking DNS.
      for (const name of more) {
        const askedAt = dns.firstAskedAt.get(name);
        assert.ok(
          askedAt === undefined || askedAt >= started + deadlineMs - 50,
          `${name} asked ${askedAt === undefined ? 'never' : `${Math.round(askedAt - started)} ms in`}`,
        );
      }
      for (const [i, result] of results.entries())
        assert.match(
          result.error ?? '',
          new RegExp(`^DNS: no DNS answer for "turn-${i}\\.example" within ${deadlineMs} ms`),
        );
    } finally {
      await client.close();
    }
  });

  test('lookups of one name share one: 5 connections to a hanging name ask the DNS server about it once', async () => {
    const client = new OutboundClient({
      allowPrivate: false,
      timeoutMs: 1000,
      connectWithinMs: 60_000,
      // One try: c-ares asks again after a third of the deadline otherwise.
      dns: { servers: [dns.server], deadlineMs: 1000, hostsFile: null },
    });
    try {
      const results = await Promise.all(
        Array.from({ length: 5 }, () => client.post('https://shared.example/hook', {}, '{}')),
      );
      assert.ok(
        results.every((result) => result.error?.startsWith('DNS: no DNS answer for "shared.example"')),
      );
      // An A and an AAAA query, each perhaps asked again once by c-ares: never one per connection.
      assert.ok((dns.asked.get('shared.example') ?? 0) <= 4, `${dns.asked.get('shared.example')} queries`);
    } finally {
      await client.close();
    }
  });

  test('the hosts file comes first, and localhost is loopback: neither asks DNS; the address guard judges them as before', async () => {
    const client = new OutboundClient({
      allowPrivate: false,
      timeoutMs: 1000,
      dns: { servers: [dns.server], hostsFile },
    });
    try {
      const before = dns.asked.size;
      assert.equal(await client.checkUrl('https://hooks.listed.example/x'), 'https://hooks.listed.example/x');
      assert.equal(await client.checkUrl('https://ALIAS.example./x'), 'https://alias.example./x');
      for (const url of ['https://localhost/x', 'https://api.localhost/x']) {
        await assert.rejects(client.checkUrl(url), (error: unknown) => {
          assert.ok(error instanceof InputError);
          assert.match(
            error.message,
            /^url refused: "(api\.)?localhost" resolves to 127\.0\.0\.1 \(loopback\)/,
          );
          return true;
        });
      }
      assert.equal(dns.asked.size, before, 'DNS was not asked');
    } finally {
      await client.close();
    }
  });

  test("the system's hosts file: localhost reaches a local receiver when private addresses are allowed", async () => {
    const receiver = await Receiver.start();
    const client = new OutboundClient({ allowPrivate: true, timeoutMs: 5000 });
    try {
      const result = await client.post(`http://localhost:${receiver.port}/hook`, {}, '{}');
      assert.deepEqual([result.status, result.error], [204, null]);
    } finally {
      await client.close();
      await receiver.close();
    }
  });

  test('a hosts file is read as getaddrinfo reads it: comments, aliases, both families, case', () => {
    const table = parseHostsFile(
      '127.0.0.1 localhost\n::1 localhost ip6-localhost\n# 10.0.0.1 hidden\n\n10.1.2.3 Build.Internal builder # note\nnot-an-ip name\n',
    );
    assert.deepEqual(table.get('localhost'), [
      { address: '127.0.0.1', family: 4 },
      { address: '::1', family: 6 },
    ]);
    assert.deepEqual(table.get('builder'), [{ address: '10.1.2.3', family: 4 }]);
    assert.deepEqual(table.get('build.internal'), [{ address: '10.1.2.3', family: 4 }]);
    assert.equal(table.get('hidden'), undefined);
    assert.equal(table.get('name'), undefined);
  });
});
