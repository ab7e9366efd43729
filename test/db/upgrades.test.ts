import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { openDatabase, type StoreName } from '../../src/db/database.ts';
import { migrateToLatest, migrations } from '../../src/db/migrate.ts';
import {
  bearer,
  createTestDatabase,
  ROOT,
  runCli,
  STORES,
  seedAccount,
  seedKey,
  startServer,
  type TestDatabase,
} from '../helpers.ts';

/**
 * Rolling upgrades (docs/deployment.md, "Upgrades"). The next release is this code with one more
 * migration (test/db/next-release.ts); the current release is the built `safety-api`. Every
 * process is a real one, on a database of its own per test.
 */

const NEXT_RELEASE = join(ROOT, 'test/db/next-release.ts');
const ADDITIVE = '9000_next_release_notes';
const BREAKING = '9000_next_release_rename';
const CURRENT = Object.keys(migrations).sort();
const DEADLINE_MS = 60_000;
const LISTENING = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/;
const WAITING_LOG = /another process is applying migrations: waiting for it/;
const SERVE_ENV = { PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' };

interface Proc {
  output(): string;
  stdout(): string;
  stderr(): string;
  /** Resolves when `pattern` has appeared in the process's output (rejects past the deadline or at exit). */
  waitFor(pattern: RegExp): Promise<RegExpMatchArray>;
  write(line: string): void;
  exited(): Promise<number | null>;
  stop(): Promise<void>;
}

function spawnProcess(args: string[], env: Record<string, string>): Proc {
  const child: ChildProcessWithoutNullStreams = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'silent', ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => {
    stdout += d;
  });
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  const exit = once(child, 'exit').then(([code]) => code as number | null);
  return {
    output: () => stdout + stderr,
    stdout: () => stdout,
    stderr: () => stderr,
    waitFor(pattern) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = pattern.exec(stdout + stderr);
          if (match === null) return false;
          clearTimeout(timer);
          child.stdout.off('data', check);
          child.stderr.off('data', check);
          resolve(match);
          return true;
        };
        const timer = setTimeout(
          () => reject(new Error(`no ${pattern} within ${DEADLINE_MS} ms:\n${stdout}${stderr}`)),
          DEADLINE_MS,
        );
        if (check()) return;
        child.stdout.on('data', check);
        child.stderr.on('data', check);
        void exit.then(() => {
          if (!check()) {
            clearTimeout(timer);
            reject(new Error(`exited before ${pattern}:\n${stdout}${stderr}`));
          }
        });
      });
    },
    write: (line) => child.stdin.write(`${line}\n`),
    exited: () => exit,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exit;
    },
  };
}

/** The next release's `safety-api`, with its extra migration of `kind`. */
const nextRelease = (kind: 'additive' | 'breaking', args: string[], env: Record<string, string>) =>
  spawnProcess([NEXT_RELEASE, ...args], { NEXT_RELEASE_MIGRATION: kind, ...env });

async function finished(proc: Proc): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const code = await proc.exited();
  return { code, stdout: proc.stdout(), stderr: proc.stderr() };
}

/** The one line a refused command or start writes, and nothing else on standard error. */
function assertOneLine(stderr: string, pattern: RegExp): void {
  const lines = stderr.split('\n').filter((line) => line !== '');
  assert.equal(lines.length, 1, `one line on standard error:\n${stderr}`);
  assert.match(lines[0] as string, pattern);
}

async function executed(url: string): Promise<string[]> {
  const handle = openDatabase(url);
  try {
    const tables = await handle.db.introspection.getTables({ withInternalKyselyTables: true });
    const present = tables.some((table) => table.name === 'kysely_migration');
    if (!present) return [];
    const { rows } = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(
      handle.db,
    );
    return rows.map((row) => row.name);
  } finally {
    await handle.destroy();
  }
}

async function markers(url: string): Promise<Record<string, number>> {
  const handle = openDatabase(url);
  try {
    const { rows } = await sql<{ name: string; additive: number }>`
      select name, additive from applied_migrations order by name`.execute(handle.db);
    return Object.fromEntries(rows.map((row) => [row.name, Number(row.additive)]));
  } finally {
    await handle.destroy();
  }
}

async function seededKey(url: string): Promise<string> {
  const handle = openDatabase(url);
  try {
    return (await seedKey(handle.db, await seedAccount(handle.db))).rawKey;
  } finally {
    await handle.destroy();
  }
}

async function withDatabase(
  store: StoreName,
  work: (database: TestDatabase) => Promise<void>,
): Promise<void> {
  const database = await createTestDatabase(store);
  try {
    await work(database);
  } finally {
    await database.drop();
  }
}

const expectedMarkers = (extra: Record<string, number>) => ({
  ...Object.fromEntries(CURRENT.map((name) => [name, migrations[name]?.additive ? 1 : 0])),
  ...extra,
});

for (const store of STORES) {
  describe(`rolling upgrades (${store})`, () => {
    test('the current release serves beside an additive migration of the next release; its migrate says so', async () => {
      await withDatabase(store, async ({ url }) => {
        const migrated = await finished(nextRelease('additive', ['migrate'], { DATABASE_URL: url }));
        assert.equal(migrated.code, 0, migrated.stderr);
        assert.match(migrated.stdout, new RegExp(`^Applied 0001_initial, .*, ${ADDITIVE}\\.$`, 'm'));
        assert.deepEqual(await markers(url), expectedMarkers({ [ADDITIVE]: 1 }));
        const rawKey = await seededKey(url);

        const server = await startServer({ DATABASE_URL: url });
        try {
          assert.match(
            server.logs(),
            new RegExp(`additive migrations of a newer release \\(${ADDITIVE}\\): serving beside them`),
          );
          const res = await fetch(`${server.url}/api/v1/public/incidents`, { headers: bearer(rawKey) });
          assert.equal(res.status, 200);
          // And it writes: a key made by the current command line works on the current server.
          const created = await runCli(
            ['keys', 'create', '--account', await accountOf(url), '--name', 'during the rollout', '--json'],
            { DATABASE_URL: url },
          );
          assert.equal(created.code, 0, created.stderr);
          const { key } = JSON.parse(created.stdout) as { key: string };
          const withNewKey = await fetch(`${server.url}/api/v1/public/departments`, { headers: bearer(key) });
          assert.equal(withNewKey.status, 200);
        } finally {
          await server.stop();
        }

        const again = await runCli(['migrate'], { DATABASE_URL: url });
        assert.equal(again.code, 0, again.stderr);
        assert.equal(
          again.stdout,
          'Database is up to date.\n' +
            `It also has additive migrations of a newer release (${ADDITIVE}): this release runs on it.\n`,
        );
        assert.deepEqual(await executed(url), [...CURRENT, ADDITIVE]);
      });
    });

    test('beside a migration that is not additive, the current release refuses to start or migrate, naming it', async () => {
      await withDatabase(store, async ({ url }) => {
        const migrated = await finished(nextRelease('breaking', ['migrate'], { DATABASE_URL: url }));
        assert.equal(migrated.code, 0, migrated.stderr);
        assert.deepEqual(await markers(url), expectedMarkers({ [BREAKING]: 0 }));

        const refusal = new RegExp(
          `^safety-api: the database schema is newer than this release: migration ${BREAKING} is not marked additive, so this release cannot run on it`,
        );
        for (const env of [{}, { MIGRATE_ON_START: 'false' }] as Record<string, string>[]) {
          const serve = await runCli(['serve'], { ...SERVE_ENV, DATABASE_URL: url, ...env });
          assert.equal(serve.code, 1, JSON.stringify(env));
          assertOneLine(serve.stderr, refusal);
          assert.doesNotMatch(serve.stdout, LISTENING);
        }
        const migrate = await runCli(['migrate'], { DATABASE_URL: url });
        assert.equal(migrate.code, 1);
        assertOneLine(migrate.stderr, refusal);
        assert.equal(migrate.stdout, '');
        assert.deepEqual(await executed(url), [...CURRENT, BREAKING]);
      });
    });

    test('MIGRATE_ON_START=false: a pending migration stops serve with a line naming safety-api migrate; none pending, it serves', async () => {
      await withDatabase(store, async ({ url }) => {
        const off = { ...SERVE_ENV, DATABASE_URL: url, MIGRATE_ON_START: 'false' };
        const fresh = await runCli(['serve'], off);
        assert.equal(fresh.code, 1);
        assertOneLine(
          fresh.stderr,
          new RegExp(
            `^safety-api: ${CURRENT.length} migrations are pending \\(${CURRENT[0]} … ${CURRENT.at(-1)}\\) and MIGRATE_ON_START=false: run "safety-api migrate" with this release first$`,
          ),
        );
        assert.deepEqual(await executed(url), [], 'nothing applied');

        assert.equal((await runCli(['migrate'], { DATABASE_URL: url })).code, 0);
        const rawKey = await seededKey(url);
        const next = await finished(nextRelease('additive', ['serve'], off));
        assert.equal(next.code, 1);
        assertOneLine(
          next.stderr,
          new RegExp(
            `^safety-api: 1 migration is pending \\(${ADDITIVE}\\) and MIGRATE_ON_START=false: run "safety-api migrate" with this release first$`,
          ),
        );
        assert.deepEqual(await executed(url), CURRENT, 'nothing applied');

        // Nothing pending: it serves. Then the upgrade's order: the next release migrates, and
        // the current one, not migrating, still serves beside it, as does the next one.
        const current = await startServer(off);
        try {
          assert.equal(
            (await fetch(`${current.url}/api/v1/public/incidents`, { headers: bearer(rawKey) })).status,
            200,
          );
        } finally {
          await current.stop();
        }
        assert.equal((await finished(nextRelease('additive', ['migrate'], { DATABASE_URL: url }))).code, 0);
        const currentBeside = await startServer(off);
        try {
          const res = await fetch(`${currentBeside.url}/api/v1/public/incidents`, {
            headers: bearer(rawKey),
          });
          assert.equal(res.status, 200);
        } finally {
          await currentBeside.stop();
        }
        const nextServer = nextRelease('additive', ['serve'], off);
        try {
          const base = (await nextServer.waitFor(LISTENING))[1] as string;
          const res = await fetch(`${base}/api/v1/public/incidents`, { headers: bearer(rawKey) });
          assert.equal(res.status, 200);
        } finally {
          await nextServer.stop();
        }
      });
    });

    test('two servers started at once on a fresh database: the migrations run once, the other waits, both serve', async () => {
      await withDatabase(store, async ({ url }) => {
        const env = { ...SERVE_ENV, DATABASE_URL: url, NEXT_RELEASE_GATE: 'stdin' };
        const servers = [nextRelease('additive', ['serve'], env), nextRelease('additive', ['serve'], env)];
        try {
          // One holds the lock inside the last migration until told to go on; the other says it waits.
          const migrating = await Promise.any(
            servers.map((s, i) => s.waitFor(/next-release: migrating/).then(() => i)),
          );
          const other = servers[1 - migrating] as Proc;
          await other.waitFor(WAITING_LOG);
          assert.doesNotMatch(other.output(), /next-release: migrating/);
          servers[migrating]?.write('go');

          const urls = await Promise.all(servers.map(async (s) => (await s.waitFor(LISTENING))[1] as string));
          assert.deepEqual(await executed(url), [...CURRENT, ADDITIVE]);
          assert.deepEqual(await markers(url), expectedMarkers({ [ADDITIVE]: 1 }));
          assert.match(servers[migrating]?.output() ?? '', /applied migrations 0001_initial, /);
          assert.doesNotMatch(other.output(), /applied migrations/);
          const handle = openDatabase(url);
          try {
            const runs = await sql<{
              n: number | string;
            }>`select count(*) as n from next_release_notes`.execute(handle.db);
            assert.equal(Number(runs.rows[0]?.n), 1, 'the migration ran once');
          } finally {
            await handle.destroy();
          }

          const rawKey = await seededKey(url);
          for (const base of urls) {
            const res = await fetch(`${base}/api/v1/public/incidents`, { headers: bearer(rawKey) });
            assert.equal(res.status, 200);
          }
        } finally {
          await Promise.all(servers.map((s) => s.stop()));
        }
      });
    });

    test('a migration that fails leaves nothing of the run behind, and names itself', async () => {
      await withDatabase(store, async ({ url }) => {
        const handle = openDatabase(url);
        migrations['9000_fails'] = {
          additive: true,
          async up(db) {
            await db.schema.createTable('half_done').addColumn('id', 'integer').execute();
            throw new Error('something went wrong');
          },
        };
        try {
          await assert.rejects(
            migrateToLatest(handle.db),
            /^Error: migration 9000_fails failed: something went wrong$/,
          );
        } finally {
          delete migrations['9000_fails'];
          await handle.destroy();
        }
        assert.deepEqual(await executed(url), [], 'the migrations before it were undone with it');
        const tables = await tablesOf(url);
        assert.ok(!tables.includes('half_done') && !tables.includes('accounts'), tables.join(', '));
      });
    });

    test('two migrate commands at once: one applies, the other waits for it and finds nothing to do', async () => {
      await withDatabase(store, async ({ url }) => {
        const env = { DATABASE_URL: url, NEXT_RELEASE_GATE: 'stdin' };
        const commands = [
          nextRelease('additive', ['migrate'], env),
          nextRelease('additive', ['migrate'], env),
        ];
        const migrating = await Promise.any(
          commands.map((c, i) => c.waitFor(/next-release: migrating/).then(() => i)),
        );
        const other = commands[1 - migrating] as Proc;
        await other.waitFor(/^Another process is applying migrations: waiting for it\.$/m);
        commands[migrating]?.write('go');
        const [first, second] = [await finished(commands[migrating] as Proc), await finished(other)];
        assert.equal(first.code, 0, first.stderr);
        assert.match(first.stdout, new RegExp(`^Applied 0001_initial, .*, ${ADDITIVE}\\.$`, 'm'));
        assert.equal(second.code, 0, second.stderr);
        assert.equal(
          second.stdout,
          'Another process is applying migrations: waiting for it.\nDatabase is up to date.\n',
        );
        assert.deepEqual(await executed(url), [...CURRENT, ADDITIVE]);
      });
    });
  });
}

async function accountOf(url: string): Promise<string> {
  const handle = openDatabase(url);
  try {
    const row = await handle.db.selectFrom('accounts').select('id').executeTakeFirstOrThrow();
    return row.id;
  } finally {
    await handle.destroy();
  }
}

async function tablesOf(url: string): Promise<string[]> {
  const handle = openDatabase(url);
  try {
    return (await handle.db.introspection.getTables()).map((table) => table.name);
  } finally {
    await handle.destroy();
  }
}
