import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { openDatabase } from '../src/db/database.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import {
  bearer,
  createTestDatabase,
  REDIS_URL,
  ROOT,
  STORES,
  seedAccount,
  seedKey,
  type TestDatabase,
} from './helpers.ts';

interface ServerProcess {
  url: string;
  logs: () => string;
  stop(): Promise<number | null>;
}

/** Starts the real `safety-api serve` on a free port and waits until it listens. */
async function startServer(env: Record<string, string>): Promise<ServerProcess> {
  const child: ChildProcessWithoutNullStreams = spawn(
    process.execPath,
    [join(ROOT, 'bin/safety-api.js'), 'serve'],
    {
      cwd: ROOT,
      env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    },
  );
  let output = '';
  child.stdout.on('data', (d) => {
    output += d;
  });
  child.stderr.on('data', (d) => {
    output += d;
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), 60_000);
    const check = () => {
      const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1] as string);
      }
    };
    child.stdout.on('data', check);
    child.on('exit', () => reject(new Error(`server exited:\n${output}`)));
  });
  return {
    url,
    logs: () => output,
    async stop() {
      child.kill('SIGTERM');
      const [code] = await once(child, 'exit');
      return code as number | null;
    },
  };
}

for (const store of STORES) {
  describe(`two server processes on one database and Redis (${store})`, () => {
    let database: TestDatabase;
    let servers: ServerProcess[];
    let key: { id: string; rawKey: string };

    before(async () => {
      database = await createTestDatabase(store);
      const handle = openDatabase(database.url);
      await migrateToLatest(handle.db);
      const accountId = await seedAccount(handle.db, { rate_limit_per_hour: 6 });
      key = await seedKey(handle.db, accountId);
      await handle.destroy();
      const env = { DATABASE_URL: database.url, REDIS_URL };
      servers = await Promise.all([startServer(env), startServer(env)]);
    });
    after(async () => {
      await Promise.all(servers.map((s) => s.stop()));
      await database.drop();
    });

    test('share one hourly allowance, log JSON with request ids, never the key, and record last use on stop', async () => {
      const statuses: number[] = [];
      const remaining: string[] = [];
      for (let i = 0; i < 8; i += 1) {
        const server = servers[i % 2]!;
        const res = await fetch(`${server.url}/api/v1/public/departments`, {
          headers: { ...bearer(key.rawKey), 'x-request-id': `req-${i}` },
        });
        statuses.push(res.status);
        remaining.push(res.headers.get('x-ratelimit-remaining') ?? '');
        assert.equal(res.headers.get('x-request-id'), `req-${i}`);
        await res.arrayBuffer();
      }
      assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200, 429, 429]);
      assert.deepEqual(remaining, ['5', '4', '3', '2', '1', '0', '0', '0']);

      for (const server of servers) {
        const lines = server
          .logs()
          .split('\n')
          .filter((line) => line.startsWith('{'));
        assert.ok(lines.length > 0);
        for (const line of lines) JSON.parse(line);
        assert.ok(lines.some((line) => /"reqId":"req-\d"/.test(line)));
        assert.ok(!server.logs().includes(key.rawKey), 'the raw key never appears in a log line');
        assert.ok(!server.logs().includes(key.rawKey.slice(4)), 'nor its hex part');
      }

      assert.deepEqual(await Promise.all(servers.map((s) => s.stop())), [0, 0]);
      const handle = openDatabase(database.url);
      const row = await handle.db
        .selectFrom('api_keys')
        .select('last_used_at')
        .where('id', '=', key.id)
        .executeTakeFirstOrThrow();
      await handle.destroy();
      assert.ok(row.last_used_at !== null, 'last use is written when the server stops');
      servers = [];
    });
  });
}
