import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import SqliteDatabase from 'better-sqlite3';
import { sql } from 'kysely';
import { type DatabaseHandle, openDatabase } from '../../src/db/database.ts';
import { ROOT } from '../helpers.ts';

describe('commit watch (SQLite in WAL mode)', () => {
  let dir: string;
  let path: string;
  let handle: DatabaseHandle;
  let other: SqliteDatabase.Database;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'safety-api-watch-'));
    path = join(dir, 'watch.db');
    handle = openDatabase(`sqlite:${path}`);
    await sql`CREATE TABLE t (n INTEGER)`.execute(handle.db);
    // A second connection, as another server instance or a CLI command would have.
    other = new SqliteDatabase(path);
  });
  after(async () => {
    other.close();
    await handle.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  const watch = () => {
    assert.ok(handle.commitWatch, 'a SQLite file in WAL mode has a commit watch');
    return handle.commitWatch;
  };

  test('stays the same while nothing is committed, reads included', async () => {
    const first = watch().current();
    await sql`SELECT count(*) FROM t`.execute(handle.db);
    other.prepare('SELECT count(*) FROM t').get();
    assert.equal(watch().current(), first);
    assert.equal(watch().current(), first);
  });

  test('changes after a commit on the same connection', async () => {
    const before = watch().current();
    await sql`INSERT INTO t VALUES (1)`.execute(handle.db);
    const after = watch().current();
    assert.notEqual(after, before);
    assert.equal(watch().current(), after, 'and then stays until the next commit');
  });

  test('changes after a commit on another connection', () => {
    const before = watch().current();
    other.prepare('INSERT INTO t VALUES (2)').run();
    assert.notEqual(watch().current(), before);
  });

  test('changes after a commit by another process', async () => {
    const before = watch().current();
    const child = spawn(
      process.execPath,
      [
        '-e',
        `const D = require('better-sqlite3'); new D(${JSON.stringify(path)}).prepare('INSERT INTO t VALUES (3)').run();`,
      ],
      { cwd: ROOT, stdio: 'inherit' },
    );
    const [code] = await once(child, 'exit');
    assert.equal(code, 0);
    assert.notEqual(watch().current(), before);
  });

  test('changes after the log is checkpointed and restarted by the next write', () => {
    other.pragma('wal_checkpoint(TRUNCATE)');
    const before = watch().current();
    other.prepare('INSERT INTO t VALUES (4)').run();
    assert.notEqual(watch().current(), before);
    // A rolled-back transaction commits nothing.
    const settled = watch().current();
    other.exec('BEGIN; INSERT INTO t VALUES (5); ROLLBACK;');
    assert.equal(watch().current(), settled);
  });

  test('follows a database opened through a symbolic link', async () => {
    const link = join(dir, 'link.db');
    symlinkSync(path, link);
    const linked = openDatabase(`sqlite:${link}`);
    try {
      assert.ok(linked.commitWatch);
      const before = linked.commitWatch.current();
      assert.equal(linked.commitWatch.current(), before);
      other.prepare('INSERT INTO t VALUES (6)').run();
      assert.notEqual(linked.commitWatch.current(), before);
    } finally {
      await linked.destroy();
    }
  });

  test('there is none for an in-memory database', () => {
    const memory = openDatabase('sqlite::memory:');
    assert.equal(memory.commitWatch, null);
    return memory.destroy();
  });
});
