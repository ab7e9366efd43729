import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { main } from '../../src/cli/main.ts';
import { createTestDatabase, ROOT, runCli, STORES, seedAccount, type TestDatabase } from '../helpers.ts';
import { openDatabase } from '../../src/db/database.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';

/** Runs `safety-api` in this process and collects what it prints. */
async function run(argv: string[]): Promise<{ code: number; out: string }> {
  const lines: string[] = [];
  const code = await main(argv, { out: (line) => lines.push(line), readStdin: async () => '' });
  return { code, out: lines.join('\n') };
}

const COMMANDS = ['serve', 'migrate', 'import', 'demo'];
const SUBCOMMANDS = [
  'accounts list',
  'keys create',
  'keys list',
  'keys rename',
  'keys disable',
  'keys enable',
  'keys revoke',
  'keys scope',
  'users set-password',
  'oauth-clients create',
  'oauth-clients list',
  'oauth-clients delete',
  'cache bump',
];

describe('safety-api --help and --version', () => {
  test('every command and subcommand has --help: a description, its usage and an example, exit 0', async () => {
    for (const name of [...COMMANDS, ...SUBCOMMANDS]) {
      for (const flag of ['--help', '-h']) {
        const { code, out } = await run([...name.split(' '), flag]);
        assert.equal(code, 0, name);
        const [summary] = out.split('\n');
        assert.ok(summary !== undefined && summary.length > 10 && !summary.startsWith('usage'), name);
        assert.match(out, new RegExp(`\\nusage:\\n  safety-api ${name}\\b`), name);
        assert.match(out, new RegExp(`\\nexample:\\n  .*safety-api ${name}\\b`), name);
      }
    }
  });

  test('a group alone or with --help lists its subcommands', async () => {
    for (const group of ['accounts', 'keys', 'users', 'oauth-clients', 'cache']) {
      for (const argv of [[group], [group, '--help']]) {
        const { code, out } = await run(argv);
        assert.equal(code, 0, argv.join(' '));
        for (const name of SUBCOMMANDS.filter((s) => s.startsWith(`${group} `))) {
          assert.ok(out.includes(`safety-api ${name}`), `${argv.join(' ')} lists ${name}`);
        }
      }
    }
  });

  test('the overview lists every command; a bare safety-api shows it and exits 2', async () => {
    const help = await run(['--help']);
    assert.equal(help.code, 0);
    for (const name of [...COMMANDS, ...SUBCOMMANDS]) assert.ok(help.out.includes(`  ${name} `), name);
    assert.equal((await run(['help'])).out, help.out);
    const bare = await run([]);
    assert.equal(bare.code, 2);
    assert.equal(bare.out, help.out);
  });

  test('--version prints the package version', async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    assert.deepEqual(await run(['--version']), { code: 0, out: version });
    assert.deepEqual(await run(['-V']), { code: 0, out: version });
  });

  test('the real executable: keys --help exits 0; an unknown action exits 2 with one line', async () => {
    const help = await runCli(['keys', '--help'], {});
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /safety-api keys create/);
    const unknown = await runCli(['keys', 'explode'], {});
    assert.equal(unknown.code, 2);
    assert.equal(
      unknown.stderr,
      'safety-api: unknown keys action "explode": expected create, list, rename, disable, enable, revoke, scope, roll or usage\n',
    );
  });

  test("an option value that looks like an option: exit 2 with one line, not parseArgs' three", async () => {
    const result = await runCli(['keys', 'create', '--account', 'a', '--name', '-bob'], {});
    assert.equal(result.code, 2);
    assert.match(
      result.stderr,
      /^safety-api: Option '--name' argument is ambiguous\. Did you forget .*'--name=-XYZ'\.\n$/,
    );
    assert.equal(result.stderr.split('\n').length, 2);
  });
});

for (const store of STORES) {
  describe(`safety-api accounts list (${store})`, () => {
    let database: TestDatabase;
    let ids: { first: string; second: string };

    before(async () => {
      database = await createTestDatabase(store);
      const handle = openDatabase(database.url);
      await migrateToLatest(handle.db);
      ids = {
        second: await seedAccount(handle.db, { name: 'zeta Works', rate_limit_per_hour: 50, api_access: 0 }),
        first: await seedAccount(handle.db, { name: 'Acme' }),
      };
      await handle.destroy();
    });
    after(() => database.drop());

    test('lists every account by name, as JSON or one line each', async () => {
      const env = { DATABASE_URL: database.url };
      const json = await runCli(['accounts', 'list', '--json'], env);
      assert.equal(json.code, 0, json.stderr);
      assert.deepEqual(JSON.parse(json.stdout), [
        { id: ids.first, name: 'Acme', api_access: true, rate_limit_per_hour: 1000, incident_count: 0 },
        { id: ids.second, name: 'zeta Works', api_access: false, rate_limit_per_hour: 50, incident_count: 0 },
      ]);
      const text = await runCli(['accounts', 'list'], env);
      assert.equal(text.code, 0, text.stderr);
      assert.deepEqual(text.stdout.trim().split('\n'), [
        `${ids.first}  "Acme"  API access, 1000 requests/hour  0 incidents`,
        `${ids.second}  "zeta Works"  no API access  0 incidents`,
      ]);
    });
  });
}

describe('npm run demo when the port is taken', () => {
  test('refuses with one line and changes nothing', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen({ port: 0, host: '0.0.0.0' }, resolve));
    const address = blocker.address();
    assert.ok(address !== null && typeof address === 'object');
    const demoDb = join(ROOT, 'data/demo.db');
    const before = existsSync(demoDb) ? statSync(demoDb).mtimeMs : null;
    try {
      const result = await runCli(['demo'], { PORT: String(address.port) });
      assert.equal(result.code, 2);
      assert.match(result.stderr, new RegExp(`^safety-api: port ${address.port} is already in use`));
      assert.equal(result.stderr.trim().split('\n').length, 1);
      assert.equal(result.stdout, '');
      assert.equal(existsSync(demoDb) ? statSync(demoDb).mtimeMs : null, before);
    } finally {
      blocker.close();
    }
  });
});
