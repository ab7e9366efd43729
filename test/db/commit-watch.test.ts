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
    const first = await watch().current();
    await sql`SELECT count(*) FROM t`.execute(handle.db);
    other.prepare('SELECT count(*) FROM t').get();
    assert.equal(await watch().current(), first);
    assert.equal(await watch().current(), first);
  });

  test('changes after a commit on the same connection', async () => {
    const before = await watch().current();
    await sql`INSERT INTO t VALUES (1)`.execute(handle.db);
    const after = await watch().current();
    assert.notEqual(after, before);
    assert.equal(await watch().current(), after, 'and then stays until the next commit');
  });

  test('changes after a commit on another connection', async () => {
    const before = await watch().current();
    other.prepare('INSERT INTO t VALUES (2)').run();
    assert.notEqual(await watch().current(), before);
  });

  test('changes after a commit by another process', async () => {
    const before = await watch().current();
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
    assert.notEqual(await watch().current(), before);
  });

  test('changes after the log is checkpointed and restarted by the next write', async () => {
    other.pragma('wal_checkpoint(TRUNCATE)');
    const before = await watch().current();
    other.prepare('INSERT INTO t VALUES (4)').run();
    assert.notEqual(await watch().current(), before);
    // A rolled-back transaction commits nothing.
    const settled = await watch().current();
    other.exec('BEGIN; INSERT INTO t VALUES (5); ROLLBACK;');
    assert.equal(await watch().current(), settled);
  });

  test('follows a database opened through a symbolic link', async () => {
    const link = join(dir, 'link.db');
    symlinkSync(path, link);
    const linked = openDatabase(`sqlite:${link}`);
    try {
      assert.ok(linked.commitWatch);
      const before = await linked.commitWatch.current();
      assert.equal(await linked.commitWatch.current(), before);
      other.prepare('INSERT INTO t VALUES (6)').run();
      assert.notEqual(await linked.commitWatch.current(), before);
    } finally {
      await linked.destroy();
    }
  });

  test('callers of one turn of the event loop share one read, made after all of them asked', async () => {
    const settled = await watch().current();
    const first = watch().current();
    const second = watch().current();
    assert.equal(first, second, 'one read for both');
    // Committed after both asked, before the read: both must see it, as with a read each.
    other.prepare('INSERT INTO t VALUES (7)').run();
    const [a, b] = await Promise.all([first, second]);
    assert.notEqual(a, settled);
    assert.equal(a, b);
  });

  test('a caller who asks once a read was made waits for a read of its own', async () => {
    const read = watch().current();
    const seen = await read;
    // This turn's read is done: asking again gets a new read, which sees the commit in between.
    other.prepare('INSERT INTO t VALUES (8)').run();
    const again = watch().current();
    assert.notEqual(again, read);
    assert.notEqual(await again, seen);
  });

  test('there is none for an in-memory database', () => {
    const memory = openDatabase('sqlite::memory:');
    assert.equal(memory.commitWatch, null);
    return memory.destroy();
  });
});
