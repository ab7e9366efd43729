import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type AddressInfo, createServer, type Server, Socket } from 'node:net';
import { after, afterEach, before, beforeEach, describe, mock, test } from 'node:test';
import type { Redis } from 'ioredis';
import { openRedis, REDIS_COMMAND_TIMEOUT_MS, RedisSuspicion, redisReady } from '../src/redis.ts';
import { blockAfterNextWriteTo } from './faults/busy-loop.ts';
import { type OwnRedis, startRedis } from './faults/harness.ts';
import { runNode } from './helpers.ts';

describe('RedisSuspicion', () => {
  beforeEach(() => mock.timers.enable({ apis: ['Date'], now: 1_000_000 }));
  afterEach(() => mock.timers.reset());

  test('a failure opens the period; failures within it do not lengthen it; after it Redis is asked again', () => {
    const suspicion = new RedisSuspicion(1000);
    assert.equal(suspicion.suspect, false, 'nothing failed yet');
    suspicion.failed();
    assert.equal(suspicion.suspect, true);
    mock.timers.tick(600);
    suspicion.failed();
    mock.timers.tick(399);
    assert.equal(suspicion.suspect, true, '999 ms after the first failure');
    mock.timers.tick(1);
    assert.equal(
      suspicion.suspect,
      false,
      'a second after the first failure, the later one within it notwithstanding',
    );
    suspicion.failed();
    assert.equal(suspicion.suspect, true, 'a failure after the period opens a new one');
  });
});

/** Resolves once this process has written to a socket connected to `port`, and the write returned. */
function nextWriteTo(port: number): Promise<void> {
  const write = Socket.prototype.write;
  return new Promise((resolve) => {
    const spy = mock.method(
      Socket.prototype,
      'write',
      function (this: Socket, ...args: Parameters<Socket['write']>) {
        if (this.remotePort === port) {
          spy.mock.restore();
          setImmediate(resolve);
        }
        return write.apply(this, args);
      },
    );
  });
}

/** Runs `command` and says when it settled (`performance.now()`) and how. */
async function settled<T>(command: Promise<T>): Promise<{ at: number; value?: T; error?: Error }> {
  try {
    const value = await command;
    return { at: performance.now(), value };
  } catch (error) {
    return { at: performance.now(), error: error instanceof Error ? error : new Error(String(error)) };
  }
}

describe("command deadline (a Redis of the test's own)", () => {
  let own: OwnRedis;
  let suspicion: RedisSuspicion;
  let connections: Redis[] = [];

  before(async () => {
    own = await startRedis();
  });
  after(async () => {
    await own?.stop();
  });
  beforeEach(async () => {
    suspicion = new RedisSuspicion();
    // Two connections sharing one suspicion, as a server process has (`openRuntime`).
    connections = [openRedis(own.url, undefined, suspicion), openRedis(own.url, undefined, suspicion)];
    for (const connection of connections) assert.ok(await redisReady(connection), 'own Redis answers');
    await connections[0]?.set('deadline-test', 'value');
  });
  afterEach(() => {
    own.process.kill('SIGCONT');
    for (const connection of connections) connection.disconnect();
  });

  test('a reply that came while the event loop was busy for two deadlines is read, not taken for lateness', async () => {
    const [connection] = connections as [Redis];
    const blocked = blockAfterNextWriteTo(own.port, 2 * REDIS_COMMAND_TIMEOUT_MS);
    const reply = await settled(connection.get('deadline-test'));
    assert.ok((await blocked) >= 2 * REDIS_COMMAND_TIMEOUT_MS, 'the loop was held past the deadline');
    assert.equal(reply.error, undefined, 'the command did not fail');
    assert.equal(reply.value, 'value');
    assert.equal(suspicion.suspect, false, 'Redis is not taken for late');
  });

  test('Redis frozen: the command fails after about the deadline; then both connections refuse at once', async () => {
    const [first, second] = connections as [Redis, Redis];
    own.process.kill('SIGSTOP');
    const sent = performance.now();
    const late = await settled(first.get('deadline-test'));
    const waited = late.at - sent;
    assert.ok(late.error !== undefined, 'the command failed');
    // (Timers count from the loop's clock, a little behind `performance.now()`.)
    assert.ok(waited > REDIS_COMMAND_TIMEOUT_MS / 2, `failed after ${Math.round(waited)} ms`);
    assert.ok(waited < 2 * REDIS_COMMAND_TIMEOUT_MS, `failed after ${Math.round(waited)} ms`);

    // Whatever a caller sends next, on either connection, costs it no second deadline: a command
    // sent to the frozen Redis would fail a whole deadline later.
    for (const connection of [first, second]) {
      const started = performance.now();
      const refused = await settled(connection.get('deadline-test'));
      assert.ok(refused.error !== undefined, 'refused');
      assert.ok(
        refused.at - started < REDIS_COMMAND_TIMEOUT_MS / 2,
        `refused after ${Math.round(refused.at - started)} ms`,
      );
    }
  });

  test('a batch is refused whole or sent whole, even if the period ends while it is handed over', async () => {
    // A period that ends between the first and the second command of a batch.
    class EndingMidBatch extends RedisSuspicion {
      private asked = 0;
      override get suspect(): boolean {
        this.asked += 1;
        return this.asked === 1;
      }
    }
    const connection = openRedis(own.url, undefined, new EndingMidBatch());
    try {
      assert.ok(await redisReady(connection), 'own Redis answers');
      // Issued in one turn: ioredis auto-pipelines them into one batch.
      const batch = await Promise.all([1, 2, 3].map(() => settled(connection.get('deadline-test'))));
      assert.deepEqual(
        batch.map((reply) => reply.error === undefined),
        [false, false, false],
        'refused whole',
      );
      // Had part of the batch been taken as sent, this reply would go to one of its commands.
      assert.equal((await settled(connection.get('deadline-test'))).value, 'value');
    } finally {
      connection.disconnect();
    }
  });

  test('Redis frozen: a command written after a late one fails with it, not at its own deadline', async () => {
    const [connection] = connections as [Redis];
    own.process.kill('SIGSTOP');
    // A transaction is written at once; then, with the loop held for half a deadline, an
    // auto-pipelined command is written too: its own deadline comes that much later.
    const written = nextWriteTo(own.port);
    const first = settled(connection.multi().get('deadline-test').exec());
    await written;
    const apart = REDIS_COMMAND_TIMEOUT_MS / 2;
    const heldFrom = performance.now();
    while (performance.now() - heldFrom < apart) {
      // Busy.
    }
    const second = settled(connection.get('deadline-test'));
    const [a, b] = await Promise.all([first, second]);
    assert.ok(a.error !== undefined && b.error !== undefined, 'both failed');
    assert.ok(
      b.at - a.at < apart / 2,
      `the later command failed ${Math.round(b.at - a.at)} ms after the first`,
    );
  });

  test('Redis frozen: a command auto-pipelining holds behind a late one fails with it, not a deadline later', async () => {
    const [connection] = connections as [Redis];
    own.process.kill('SIGSTOP');
    // The first command is written; the second is issued while it waits, and ioredis sends one
    // auto-pipelined batch at a time, so it waits for the first to be settled before it is sent.
    const written = nextWriteTo(own.port);
    const first = settled(connection.get('deadline-test'));
    await written;
    const second = settled(connection.get('deadline-test'));
    const [a, b] = await Promise.all([first, second]);
    assert.ok(a.error !== undefined && b.error !== undefined, 'both failed');
    // Sent once the first is settled, it would fail a whole deadline after it.
    assert.ok(
      b.at - a.at < REDIS_COMMAND_TIMEOUT_MS / 2,
      `the held command failed ${Math.round(b.at - a.at)} ms after the late one`,
    );
  });
});

describe('a connection whose Redis dies', () => {
  test('a command under way fails as the connection closes, not after the next attempt to connect', async () => {
    const own = await startRedis();
    const connection = openRedis(own.url);
    try {
      assert.ok(await redisReady(connection), 'own Redis answers');
      const steps: string[] = [];
      // Frozen, so that the command is surely under way when Redis dies.
      own.process.kill('SIGSTOP');
      const written = nextWriteTo(own.port);
      const command = connection.get('deadline-test').then(
        () => steps.push('answered'),
        () => steps.push('failed'),
      );
      await written;
      connection.on('connecting', () => steps.push('connecting again'));
      const exited = once(own.process, 'exit');
      own.process.kill('SIGKILL');
      await Promise.all([command, exited]);
      assert.deepEqual(steps.slice(0, 1), ['failed'], `in this order: ${steps.join(', ')}`);
    } finally {
      connection.disconnect();
      await own.stop();
    }
  });
});

describe('a connection that never reached Redis', () => {
  test('disconnected, leaves no timer behind: a command-line process exits at once', async () => {
    // A port nothing listens on: every attempt to connect is refused.
    const probe = createServer().listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const { port } = probe.address() as AddressInfo;
    probe.close();
    await once(probe, 'close');
    // In a process of its own, as the command line runs it: in this one, the timers of the tests
    // before (and of the runner) come and go while it is looked at.
    const script = `
      const { openRedis } = await import(${JSON.stringify(new URL('../src/redis.ts', import.meta.url).href)});
      const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
      const before = timers();
      const connection = openRedis('redis://127.0.0.1:${port}');
      // Not events.once: it would reject at the 'error' that comes first.
      await new Promise((resolve) => connection.once('reconnecting', resolve));
      connection.disconnect();
      console.log(JSON.stringify({ before, after: timers() }));
    `;
    const { code, stdout, stderr } = await runNode(['--input-type=module', '-e', script]);
    assert.equal(code, 0, stderr);
    // ioredis waits for the socket's close (up to 2 s, on a timer that keeps the process alive) even
    // when that socket closed already, refused: `safety-api keys create` took 2 s more to exit.
    assert.deepEqual(JSON.parse(stdout), { before: 0, after: 0 }, 'no timer is left running');
  });
});

/** A RESP array of bulk strings. */
const respArray = (items: string[]) =>
  `*${items.length}\r\n${items.map((item) => `$${Buffer.byteLength(item)}\r\n${item}\r\n`).join('')}`;

/** The commands in `buffer` (RESP arrays of bulk strings, as clients send), and what is left over. */
function readCommands(buffer: Buffer): { commands: string[][]; rest: Buffer } {
  const commands: string[][] = [];
  let at = 0;
  for (;;) {
    const header = buffer.indexOf('\r\n', at);
    if (buffer[at] !== 0x2a || header < 0) break;
    const count = Number(buffer.subarray(at + 1, header).toString());
    const args: string[] = [];
    let next = header + 2;
    for (let i = 0; i < count && next > 0; i += 1) {
      const lengthEnd = buffer.indexOf('\r\n', next);
      const length = Number(buffer.subarray(next + 1, lengthEnd).toString());
      const start = lengthEnd + 2;
      if (lengthEnd < 0 || buffer.length < start + length + 2) next = -1;
      else {
        args.push(buffer.subarray(start, start + length).toString());
        next = start + length + 2;
      }
    }
    if (next < 0 || args.length < count) break;
    commands.push(args);
    at = next;
  }
  return { commands, rest: buffer.subarray(at) };
}

/**
 * A stand-in for a Sentinel that the test steers: it names `primaryPort` as the primary, and can
 * hold its answer to the next such question, and announce `+switch-master` to its subscribers
 * (what a failover detector listens to), which real Sentinels only do in a real failover.
 */
async function startFakeSentinel(primaryPort: number) {
  const subscribers = new Set<Socket>();
  let subscribed: () => void = () => {};
  const firstSubscriber = new Promise<void>((resolve) => {
    subscribed = resolve;
  });
  let holdNext: ((answer: () => void) => void) | null = null;
  const server: Server = createServer((socket) => {
    socket.on('error', () => {});
    socket.on('close', () => subscribers.delete(socket));
    let pending: Buffer = Buffer.alloc(0);
    socket.on('data', (chunk) => {
      const { commands, rest } = readCommands(Buffer.concat([pending, chunk]));
      pending = rest;
      for (const [name = '', ...args] of commands) {
        const command = `${name} ${args[0] ?? ''}`.toLowerCase();
        if (command.startsWith('subscribe')) {
          subscribers.add(socket);
          subscribed();
          socket.write(
            `*3\r\n$9\r\nsubscribe\r\n$${Buffer.byteLength(args[0] ?? '')}\r\n${args[0]}\r\n:1\r\n`,
          );
        } else if (command === 'sentinel get-master-addr-by-name') {
          const answer = () => socket.write(respArray(['127.0.0.1', String(primaryPort)]));
          const hold = holdNext;
          holdNext = null;
          if (hold === null) answer();
          else hold(answer);
        } else if (command === 'sentinel sentinels') socket.write('*0\r\n');
        else socket.write('-ERR not a command this stand-in knows\r\n');
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    url: `redis+sentinel://127.0.0.1:${port}/safety-primary`,
    /** Resolves once a client subscribed (a failover detector). */
    firstSubscriber,
    /** Resolves, with a function that sends the answer, when the next question about the primary comes. */
    holdNextAnswer: () =>
      new Promise<() => void>((resolve) => {
        holdNext = resolve;
      }),
    /** Announces a failover to every subscriber; resolves once each has closed its connection. */
    async announceSwitch(): Promise<void> {
      const closed = [...subscribers].map((socket) => once(socket, 'close'));
      for (const socket of subscribers) {
        socket.write(respArray(['message', '+switch-master', 'safety-primary 127.0.0.1 1 127.0.0.1 2']));
      }
      await Promise.all(closed);
    },
    close(): Promise<void> {
      for (const socket of subscribers) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

describe("a connection through Sentinels (a stand-in Sentinel, a Redis of the test's own)", () => {
  test('a +switch-master that comes while the connection asks for the primary does not end it for good', async () => {
    const own = await startRedis();
    const sentinel = await startFakeSentinel(own.port);
    const connection = openRedis(sentinel.url);
    try {
      assert.ok(await redisReady(connection, 5000), 'connected through the Sentinel');
      // The failover detector subscribes once the connection is made.
      await sentinel.firstSubscriber;
      const held = sentinel.holdNextAnswer();
      // The primary goes away: the connection asks the Sentinel where the primary is now…
      connection.stream.destroy();
      const answer = await held;
      // …and the Sentinels announce the switch while the answer is on its way.
      await sentinel.announceSwitch();
      answer();
      assert.ok(await redisReady(connection, 5000), `connected again (status ${connection.status})`);
      assert.equal(await connection.ping(), 'PONG');
    } finally {
      connection.disconnect();
      await sentinel.close();
      await own.stop();
    }
  });
});
