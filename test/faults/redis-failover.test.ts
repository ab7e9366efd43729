import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Redis } from 'ioredis';
import { openDatabase, type StoreName } from '../../src/db/database.ts';
import { REDIS_COMMAND_TIMEOUT_MS } from '../../src/redis.ts';
import {
  bearer,
  createTestDatabase,
  type ServerProcess,
  STORES,
  seedAccount,
  seedKey,
  startServer,
  type TestDatabase,
} from '../helpers.ts';
import { type OwnRedis, startRedis, timed } from './harness.ts';
import { sleep, until } from '../wait.ts';

/**
 * A Redis primary, its replica and three Sentinels of the test's own; two server processes with
 * REDIS_URL in its Sentinel form; the primary killed while requests keep coming. PostgreSQL where
 * it is tested: there each server holds two Redis connections (the count has one of its own).
 */
const store: StoreName = STORES.includes('postgres') ? 'postgres' : 'sqlite';

const MASTER = 'safety-primary';
const PASSWORD = 'failover-test-secret';
const DB = 2;
const ALLOWANCE = 1_000_000;
/**
 * The bound on every answer through the whole failover, beyond what the machine takes for the
 * slowest answer while Redis is healthy (measured in the same run, before the kill): one Redis
 * command's deadline, after which a request goes on without Redis, and a margin. On a quiet machine
 * that is about half a second; under load the steady answers show what the load adds.
 */
const MAX_MS_ABOVE_STEADY = REDIS_COMMAND_TIMEOUT_MS + 300;
/** How soon after the Sentinels name the new primary the instances must count together again. */
const SHARED_AGAIN_WITHIN_MS = 5000;

const UNAVAILABLE = /^Redis unavailable/;
const AVAILABLE = /^Redis available again/;

interface Answer {
  status: number;
  ms: number;
  /** Unix milliseconds at which it arrived. */
  at: number;
  remaining: number;
}

/** The server's JSON log lines whose message matches `message`. */
function logged(server: ServerProcess, message: RegExp): Record<string, unknown>[] {
  return server
    .logs()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line): Record<string, unknown> => JSON.parse(line))
    .filter((line) => message.test(String(line.msg)));
}

/** A Sentinel reply listing instances (`SENTINEL REPLICAS`, `SENTINEL SENTINELS`), as field maps. */
function instances(reply: unknown): Map<string, string>[] {
  if (!Array.isArray(reply)) return [];
  return reply.map((fields) => {
    const record = new Map<string, string>();
    if (Array.isArray(fields))
      for (let i = 0; i + 1 < fields.length; i += 2) record.set(String(fields[i]), String(fields[i + 1]));
    return record;
  });
}

describe(`Redis failover through Sentinel, under load (${store})`, () => {
  let dir: string;
  let primary: OwnRedis;
  let replica: OwnRedis;
  let sentinels: OwnRedis[] = [];
  let database: TestDatabase;
  const servers: ServerProcess[] = [];
  let loadKey: string;
  let probeKey: { id: string; rawKey: string };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'safety-api-sentinel-'));
    primary = await startRedis({ password: PASSWORD });
    // A replica keeps what it syncs in a file: in the test's directory.
    replica = await startRedis({
      password: PASSWORD,
      args: ['--replicaof', '127.0.0.1', String(primary.port), '--dir', dir],
    });
    // Quick to call the primary down (1 s without an answer) and quick to retry a failover.
    const conf = [
      `sentinel monitor ${MASTER} 127.0.0.1 ${primary.port} 2`,
      `sentinel auth-pass ${MASTER} ${PASSWORD}`,
      `sentinel down-after-milliseconds ${MASTER} 1000`,
      `sentinel failover-timeout ${MASTER} 5000`,
      '',
    ].join('\n');
    sentinels = await Promise.all(
      [0, 1, 2].map((i) => {
        const configFile = join(dir, `sentinel-${i}.conf`);
        writeFileSync(configFile, conf);
        return startRedis({ configFile, args: ['--dir', dir, '--sentinel'] });
      }),
    );
    // Each Sentinel must know the replica (in sync) and the two others before a failover can happen.
    const watching = sentinels.map((sentinel) => sentinel.inspect());
    await until(
      async () => {
        for (const sentinel of watching) {
          const replicas = instances(await sentinel.call('SENTINEL', 'REPLICAS', MASTER));
          const others = instances(await sentinel.call('SENTINEL', 'SENTINELS', MASTER));
          const synced = replicas.some(
            (r) => r.get('port') === String(replica.port) && r.get('master-link-status') === 'ok',
          );
          if (!synced || others.length < 2) return false;
        }
        return true;
      },
      30_000,
      'the Sentinels to find the replica and each other',
      200,
    );

    database = await createTestDatabase(store);
    const redisUrl = `redis+sentinel://:${PASSWORD}@${sentinels
      .map((sentinel) => `127.0.0.1:${sentinel.port}`)
      .join(',')}/${MASTER}?db=${DB}`;
    // At debug, each Redis connection's steps are logged too: what a failure here prints.
    const env = { DATABASE_URL: database.url, REDIS_URL: redisUrl, LOG_LEVEL: 'debug' };
    // The first server migrates the new database; the keys are made before any request.
    servers.push(await startServer(env));
    const handle = openDatabase(database.url);
    try {
      const accountId = await seedAccount(handle.db, { rate_limit_per_hour: ALLOWANCE });
      loadKey = (await seedKey(handle.db, accountId)).rawKey;
      probeKey = await seedKey(handle.db, accountId);
    } finally {
      await handle.destroy();
    }
    servers.push(await startServer(env));
  });

  after(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    await Promise.all([primary, replica, ...sentinels].map((redis) => redis?.stop()));
    await database?.drop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  test('the primary killed: every answer 200 and at most a Redis deadline (+ margin) slower than before it, limits shared again within seconds, one line down and one up', async () => {
    const [a, b] = servers;
    assert.ok(a !== undefined && b !== undefined);
    const answers: Answer[] = [];
    const request = async (server: ServerProcess, rawKey: string): Promise<number> => {
      const { result, ms } = await timed(async () => {
        const res = await fetch(`${server.url}/api/v1/public/departments`, {
          headers: bearer(rawKey),
          signal: AbortSignal.timeout(5000),
        });
        await res.arrayBuffer();
        return res;
      });
      const remaining = Number(result.headers.get('x-ratelimit-remaining'));
      answers.push({ status: result.status, ms, at: Date.now(), remaining });
      return remaining;
    };

    /** What the last probe saw, for the message of a failure. */
    let lastProbe = '';
    /**
     * Whether the two instances count the probe key in one place, the Redis `primary` holds: one
     * request each way, A then B then A, leave one less each time, and the count there agrees.
     */
    const countedTogether = async (on: Redis): Promise<boolean> => {
      const first = await request(a, probeKey.rawKey);
      const second = await request(b, probeKey.rawKey);
      const third = await request(a, probeKey.rawKey);
      const stored = await on.get(`safety-api:rl:${probeKey.id}`);
      lastProbe = `remaining ${first}, ${second}, ${third}; the count in Redis ${stored}`;
      if (second !== first - 1 || third !== second - 1) return false;
      return Number(stored) === ALLOWANCE - third;
    };
    /** Each instance's log lines about Redis, for the message of a failure. */
    const redisLines = () =>
      servers
        .map(
          (server, i) =>
            `instance ${i}: ${logged(server, /Redis/)
              .map((line) => JSON.stringify(line))
              .join(' ')}`,
        )
        .join('\n');
    const onPrimary = primary.inspect();
    const onReplica = replica.inspect();
    await Promise.all([onPrimary.select(DB), onReplica.select(DB)]);
    assert.ok(await countedTogether(onPrimary), 'before the failover the instances count together');

    // Steady load: two clients per instance, one request after another.
    let loading = true;
    const load = servers.flatMap((server) =>
      [0, 1].map(async () => {
        while (loading) {
          await request(server, loadKey);
          await sleep(10);
        }
      }),
    );
    await sleep(1000);

    const exited = new Promise((resolve) => primary.process.once('exit', resolve));
    const killedAt = Date.now();
    primary.process.kill('SIGKILL');
    await exited;

    const sentinel = sentinels[0]!.inspect();
    let promotedAt = 0;
    await until(
      async () => {
        const address = await sentinel.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER);
        promotedAt = Date.now();
        return Array.isArray(address) && String(address[1]) === String(replica.port);
      },
      20_000,
      'the Sentinels to promote the replica',
    );

    let sharedAt = 0;
    await until(
      async () => {
        sharedAt = Date.now();
        return countedTogether(onReplica);
      },
      SHARED_AGAIN_WITHIN_MS * 2,
      () => `the instances to count together on the new primary (last probe: ${lastProbe})\n${redisLines()}`,
      100,
    );

    // The recovery line has no deadline of its own (sharing again does): it comes once every
    // connection of the instance has stayed ready for a second, later on a loaded machine.
    await until(
      async () => servers.every((server) => logged(server, AVAILABLE).length > 0),
      20_000,
      () =>
        `every instance to log the recovery; their Redis lines: ${JSON.stringify(servers.map((server) => logged(server, /Redis/)))}`,
      200,
    );
    // More load once every instance is back: no more lines, nothing slower.
    await sleep(1500);
    loading = false;
    await Promise.all(load);

    const during = answers.filter((answer) => answer.at > killedAt && answer.at < sharedAt);
    const slowest = Math.max(...answers.map((answer) => answer.ms));
    const steady = Math.max(...answers.filter((answer) => answer.at < killedAt).map((answer) => answer.ms));
    const bound = steady + MAX_MS_ABOVE_STEADY;
    const failed = answers.filter((answer) => answer.status !== 200);
    console.log(
      `${answers.length} answers, ${during.length} between the kill and counting together again; ` +
        `promoted ${promotedAt - killedAt} ms after the kill, shared again ${sharedAt - promotedAt} ms ` +
        `after the promotion; slowest answer ${Math.round(slowest)} ms, ${Math.round(steady)} ms before the kill`,
    );
    assert.deepEqual(failed, [], 'every answer is 200: no 5xx, no timeout');
    assert.ok(
      slowest < bound,
      `every answer within ${Math.round(bound)} ms (slowest ${Math.round(slowest)} ms; ${Math.round(steady)} ms before the kill)`,
    );
    assert.ok(during.length >= 50, `the load went on through the failover (${during.length} answers)`);
    assert.ok(
      sharedAt - promotedAt < SHARED_AGAIN_WITHIN_MS,
      `counting together again ${sharedAt - promotedAt} ms after the promotion`,
    );

    for (const server of servers) {
      const down = logged(server, UNAVAILABLE);
      const up = logged(server, AVAILABLE);
      assert.equal(down.length, 1, `one line for the failover: ${JSON.stringify(down)}`);
      assert.equal(up.length, 1, `one line for the recovery: ${JSON.stringify(up)}`);
      assert.equal(down[0]?.primary, `127.0.0.1:${primary.port}`, 'the lost primary is named');
      assert.equal(up[0]?.primary, `127.0.0.1:${replica.port}`, 'the new primary is named');
      assert.ok(
        logged(server, /^Redis connection ready$/).some(
          (line) => line.level === 20 && line.address === `127.0.0.1:${replica.port}`,
        ),
        `at debug, a connection says it is ready at the new primary: ${JSON.stringify(logged(server, /Redis connection/).slice(-6))}`,
      );
      assert.ok(!server.logs().includes(PASSWORD), 'the password is in no log line');
    }
  });
});
