import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { createTestContext, createTestDatabase, runCli, STORES, type TestContext } from '../helpers.ts';
import {
  type Answer,
  answers,
  appOn,
  importWhile,
  type Populated,
  populate,
  requestsOf,
  totalOf,
} from './store-fixtures.ts';

const IMPORT_BATCH = 40;

describe(
  'backup and restore (SQLite)',
  { skip: !STORES.includes('sqlite') && 'SQLite is not among TEST_STORES' },
  () => {
    let ctx: TestContext;
    let populated: Populated;
    let sourceAnswers: Answer[];
    let dir: string;
    let file: string;
    let batches: number;
    let backedUp: { code: number; stdout: string; stderr: string };

    before(async () => {
      ctx = await createTestContext('sqlite');
      populated = await populate(ctx);
      sourceAnswers = await answers(ctx.app, requestsOf(populated));
      dir = mkdtempSync(join(tmpdir(), 'safety-api-backup-'));
      file = join(dir, 'backup.db');
      // The server's handle keeps serving and importing while the backup is made.
      const imports = importWhile(ctx, populated.busy, IMPORT_BATCH);
      backedUp = await runCli(['backup', '--to', file], { DATABASE_URL: ctx.databaseUrl });
      batches = await imports.stop();
    });
    after(async () => {
      rmSync(dir, { recursive: true, force: true });
      await ctx.close();
    });

    test('backup writes one consistent file while the server imports, never over an existing one', async () => {
      assert.equal(backedUp.code, 0, backedUp.stderr);
      assert.match(
        backedUp.stdout,
        /^Backed up to .*backup\.db: [\d,]+ bytes, 3 accounts, [\d,]+ incidents, in [\d.]+ s\.\n$/,
      );
      assert.ok(batches > 0, 'imports ran during the backup');
      assert.deepEqual(readdirSync(dir), ['backup.db'], 'no partial file is left beside it');
      const again = await runCli(['backup', '--to', file], { DATABASE_URL: ctx.databaseUrl });
      assert.equal(again.code, 2);
      assert.equal(again.stderr, `safety-api: ${file} exists already: a backup never overwrites a file\n`);
    });

    test('backup is for SQLite: PostgreSQL is pointed to pg_dump', async () => {
      const run = await runCli(['backup', '--to', join(dir, 'pg.db')], {
        DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/whatever',
      });
      assert.equal(run.code, 2);
      assert.match(
        run.stderr,
        /^safety-api: backup is for SQLite: back PostgreSQL up with pg_dump and pg_restore/,
      );
      assert.equal(existsSync(join(dir, 'pg.db')), false);
    });

    for (const store of STORES) {
      test(`restore into an empty ${store} store answers as the source did; a store holding data is refused`, async () => {
        const target = await createTestDatabase(store);
        try {
          const restored = await runCli(['restore', '--from', file], { DATABASE_URL: target.url });
          assert.equal(restored.code, 0, restored.stderr);
          assert.match(
            restored.stdout,
            /\n {2}incidents +[\d,]+ [0-9a-f]{32} \| +[\d,]+ [0-9a-f]{32} {2}ok\n/,
          );
          const opened = await appOn(target.url);
          try {
            assert.deepEqual(await answers(opened.app, requestsOf(populated)), sourceAnswers);
            const busy = await totalOf(opened.app, populated.keys.busy);
            assert.equal(busy % IMPORT_BATCH, 0, `${busy} incidents: not a whole number of imports`);
          } finally {
            await opened.close();
          }
          const refused = await runCli(['restore', '--from', file], { DATABASE_URL: target.url });
          assert.equal(refused.code, 2);
          assert.match(refused.stderr, /^safety-api: the target is not empty /);
        } finally {
          await target.drop();
        }
      });
    }

    test('restore refuses a missing file, and a file that is not a SQLite database', async () => {
      const env = { DATABASE_URL: `sqlite:${join(dir, 'x.db')}` };
      const missing = await runCli(['restore', '--from', join(dir, 'nothing-here.db')], env);
      assert.equal(missing.code, 2);
      assert.match(missing.stderr, /^safety-api: --from: no file at /);
      const text = join(dir, 'notes.txt');
      writeFileSync(text, 'not a database at all');
      const wrong = await runCli(['restore', '--from', text], env);
      assert.equal(wrong.code, 2);
      assert.match(wrong.stderr, /is not a SQLite database/);
      assert.equal(existsSync(join(dir, 'x.db')), false, 'nothing was created');
      rmSync(text);
    });
  },
);

const pgDumpMissing =
  spawnSync('pg_dump', ['--version']).status !== 0 || spawnSync('pg_restore', ['--version']).status !== 0;

describe(
  'PostgreSQL: a pg_dump restored into a new database with pg_restore',
  {
    skip: !STORES.includes('postgres')
      ? 'PostgreSQL is not among TEST_STORES'
      : pgDumpMissing && 'pg_dump or pg_restore is not installed on this machine',
  },
  () => {
    test('serves the same answers: pages, ETags, a saved cursor, every key state', async () => {
      const ctx = await createTestContext('postgres');
      const dir = mkdtempSync(join(tmpdir(), 'safety-api-pgdump-'));
      const target = await createTestDatabase('postgres');
      try {
        const populated = await populate(ctx);
        const expected = await answers(ctx.app, requestsOf(populated));
        const dump = join(dir, 'safety.dump');
        const dumped = spawnSync('pg_dump', ['--format=custom', `--file=${dump}`, ctx.databaseUrl], {
          encoding: 'utf8',
        });
        assert.equal(dumped.status, 0, dumped.stderr);
        const restored = spawnSync('pg_restore', ['--no-owner', `--dbname=${target.url}`, dump], {
          encoding: 'utf8',
        });
        assert.equal(restored.status, 0, restored.stderr);
        const opened = await appOn(target.url);
        try {
          assert.deepEqual(await answers(opened.app, requestsOf(populated)), expected);
        } finally {
          await opened.close();
        }
        // The identity columns went along: a new audit event gets an id past the dumped ones.
        const client = new pg.Client({ connectionString: target.url });
        await client.connect();
        try {
          const { rows: top } = await client.query('select max(id) as max from audit_events');
          assert.ok(Number(top[0].max) > 0, 'the dump held audit events');
          const { rows } = await client.query(
            "insert into audit_events (account_id, subject_id, actor, action, created_at) select id, 'x', 'test', 'sequence check', '2026-01-01T00:00:00.000Z' from accounts limit 1 returning id",
          );
          assert.ok(Number(rows[0].id) > Number(top[0].max));
        } finally {
          await client.end();
        }
      } finally {
        await target.drop();
        rmSync(dir, { recursive: true, force: true });
        await ctx.close();
      }
    });
  },
);
