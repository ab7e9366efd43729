import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import SqliteDatabase from 'better-sqlite3';
import { main } from '../../src/cli/main.ts';
import { freePort, startRelay, timed } from '../faults/harness.ts';
import {
  createTestDatabase,
  runCli,
  type ServerProcess,
  STORES,
  startServer,
  type TestDatabase,
} from '../helpers.ts';

/** The bound for an answer, and what a loaded machine may add to starting a process. */
const ANSWER_MS = 2000;
const MARGIN_MS = 1000;

/**
 * Where a test's subject is that a ready server passes (exit 0, nothing printed), not how soon a
 * silent one fails: a timeout no busy machine reaches. The 2 s default is the subject of the tests
 * of a frozen server and a frozen database, and --timeout's of its own.
 */
const PASS_MS = 30_000;
const PASS = ['--timeout', String(PASS_MS / 1000)];
/** "At once" where no timeout is at stake: far below PASS_MS, whatever starting a process costs. */
const AT_ONCE_MS = PASS_MS / 2 - MARGIN_MS;

/** `safety-api healthcheck` (the real executable) against `port`, timed. */
async function healthcheck(port: number, args: string[] = [], env: Record<string, string> = {}) {
  const { result, ms } = await timed(() =>
    runCli(['healthcheck', ...args], { PORT: String(port), HOST: '127.0.0.1', ...env }),
  );
  return { ...result, ms };
}

/**
 * `healthcheck` against a server that does not answer, started together with the same command
 * against a port nothing listens on, which fails at once: the second's time is what starting the
 * process costs on this machine at this moment, so `ms` is the first's wait alone, whatever else
 * the machine does (a busy machine once took 1.2 s more to start the process than to wait). That
 * one's timeout is far away: a start slower than the whole 2 s once left it too little time to hear
 * the refusal.
 */
async function healthcheckWaiting(port: number, args: string[] = []) {
  const [waiting, refused] = await Promise.all([
    healthcheck(port, args),
    healthcheck(await freePort(), [...args, ...PASS]),
  ]);
  assert.match(refused.stderr, /not reachable: connect ECONNREFUSED/);
  return { ...waiting, ms: waiting.ms - refused.ms };
}

/** Exit 1, one line on standard error matching `line`, nothing on standard output, in time. */
function assertFails(
  result: Awaited<ReturnType<typeof healthcheck>>,
  line: RegExp,
  answerMs = ANSWER_MS,
): void {
  assert.equal(result.code, 1, result.stderr);
  assert.equal(result.stdout, '');
  assert.match(result.stderr, line);
  assert.equal(result.stderr.split('\n').length, 2, `one line: ${JSON.stringify(result.stderr)}`);
  assert.ok(result.ms < answerMs + MARGIN_MS, `answered in ${Math.round(result.ms)} ms`);
}

function assertPasses(result: Awaited<ReturnType<typeof healthcheck>>): void {
  assert.deepEqual(
    { code: result.code, stdout: result.stdout, stderr: result.stderr },
    {
      code: 0,
      stdout: '',
      stderr: '',
    },
  );
}

describe('safety-api healthcheck --help', () => {
  test('has a description, its usage and an example; the overview lists it', async () => {
    const lines: string[] = [];
    const io = { out: (line: string) => lines.push(line), readStdin: async () => '' };
    assert.equal(await main(['healthcheck', '--help'], io), 0);
    const help = lines.join('\n');
    assert.match(help, /\nusage:\n {2}safety-api healthcheck \[--live\] \[--timeout SECONDS\]\n/);
    assert.match(help, /\nexample:\n {2}safety-api healthcheck --live/);
    lines.length = 0;
    assert.equal(await main(['--help'], io), 0);
    assert.match(lines.join('\n'), /\n {2}healthcheck +Ask the local server's \/readyz/);
  });

  test('the real executable shows the same help, and refuses an unknown option with exit 1', async () => {
    const help = await runCli(['healthcheck', '--help'], {});
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /safety-api healthcheck \[--live\]/);
    // Docker reserves exit code 2: a health check exits 0 or 1, whatever went wrong.
    const bad = await healthcheck(1, ['--bogus']);
    assertFails(bad, /^safety-api: healthcheck: Unknown option '--bogus'/);
    const badPort = await healthcheck(1, [], { PORT: 'eighty' });
    assertFails(badPort, /^safety-api: healthcheck: invalid configuration: PORT must be an integer/);
    for (const timeout of ['0', '-1', 'ten', '61', '2s', '']) {
      const badTimeout = await healthcheck(1, [`--timeout=${timeout}`]);
      assertFails(
        badTimeout,
        /^safety-api: healthcheck: --timeout must be a number of seconds above 0 and at most 60, not ".*"\n$/,
        AT_ONCE_MS,
      );
    }
  });
});

for (const store of STORES) {
  describe(`safety-api healthcheck against a real server (${store})`, () => {
    let database: TestDatabase;
    let server: ServerProcess;

    before(async () => {
      database = await createTestDatabase(store);
      server = await startServer({ DATABASE_URL: database.url });
    });
    after(async () => {
      await server.stop();
      await database.drop();
    });

    test('ready: exit 0 and nothing printed, for /readyz and --live; HOST 0.0.0.0 is asked on loopback', async () => {
      assertPasses(await healthcheck(server.port, PASS));
      assertPasses(await healthcheck(server.port, ['--live', ...PASS]));
      assertPasses(await healthcheck(server.port, PASS, { HOST: '0.0.0.0' }));
    });

    if (store === 'sqlite') {
      test("another process's write lock leaves it ready: reads go on, so /readyz answers 200", async () => {
        const other = new SqliteDatabase(database.url.slice('sqlite:'.length));
        try {
          other.exec('BEGIN IMMEDIATE');
          assertPasses(await healthcheck(server.port, PASS));
        } finally {
          other.close();
        }
      });
    }

    test('a server that does not answer (frozen, its port open): exit 1 within ~2 s (or --timeout), one line', async () => {
      server.signal('SIGSTOP');
      try {
        assertFails(
          await healthcheckWaiting(server.port),
          /^safety-api: \/readyz on 127\.0\.0\.1:\d+: no answer within 2 s\n$/,
        );
        assertFails(
          await healthcheckWaiting(server.port, ['--live']),
          /^safety-api: \/healthz on 127\.0\.0\.1:\d+: no answer within 2 s\n$/,
        );
        assertFails(
          await healthcheckWaiting(server.port, ['--timeout', '2.5']),
          /^safety-api: \/readyz on 127\.0\.0\.1:\d+: no answer within 2\.5 s\n$/,
          2500,
        );
      } finally {
        server.signal('SIGCONT');
      }
      assertPasses(await healthcheck(server.port, PASS));
    });

    test('a stopped server: exit 1 at once, one line saying it is not reachable', async () => {
      const port = server.port;
      assert.equal(await server.stop(), 0);
      // At once: not after its timeout, set far above what starting the process can take.
      const result = await healthcheck(port, PASS);
      assertFails(
        result,
        /^safety-api: \/readyz on 127\.0\.0\.1:\d+: not reachable: connect ECONNREFUSED/,
        AT_ONCE_MS,
      );
    });
  });
}

if (STORES.includes('postgres')) {
  describe('safety-api healthcheck with the database frozen or gone (postgres)', () => {
    let database: TestDatabase;
    let relay: Awaited<ReturnType<typeof startRelay>>;
    let server: ServerProcess;

    before(async () => {
      database = await createTestDatabase('postgres');
      relay = await startRelay(database.url);
      server = await startServer({ DATABASE_URL: relay.url });
    });
    after(async () => {
      await server.stop();
      await relay.close();
      await database.drop();
    });

    test('database frozen: /readyz cannot answer ready, exit 1 within ~2 s; --live still exit 0', async () => {
      assertPasses(await healthcheck(server.port, PASS));
      relay.freeze();
      const frozen = await healthcheckWaiting(server.port);
      // The server answers 503 once its store deadline (2.5 s) is over; the probe gives up first.
      assertFails(frozen, /^safety-api: \/readyz on 127\.0\.0\.1:\d+: (no answer within 2 s|answered 503)/);
      assertPasses(await healthcheck(server.port, ['--live', ...PASS]));
    });

    test('database gone: /readyz answers 503, exit 1 with the answer in its line', async () => {
      await relay.close();
      const gone = await healthcheck(server.port, PASS);
      assertFails(
        gone,
        /^safety-api: \/readyz on 127\.0\.0\.1:\d+ answered 503: \{"status":"unavailable","database":"down","redis":"not configured"\}\n$/,
        PASS_MS,
      );
      assertPasses(await healthcheck(server.port, ['--live', ...PASS]));
    });
  });
}
