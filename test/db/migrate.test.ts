import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { migrations } from '../../src/db/migrate.ts';
import { createTestDatabase, runCli, STORES, type TestDatabase } from '../helpers.ts';

/** The migrations recorded as applied in `url`'s database; none when it has no migration table. */
async function applied(url: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const table = await client.query(`select to_regclass('kysely_migration') as name`);
    if (table.rows[0].name === null) return [];
    const { rows } = await client.query('select name from kysely_migration order by name');
    return rows.map((row: { name: string }) => row.name);
  } finally {
    await client.end();
  }
}

/** The same database under another host name, as a second route to it (a pooler and the server). */
function otherRoute(url: string): string {
  const other = new URL(url);
  other.hostname = other.hostname === 'localhost' ? '127.0.0.1' : 'localhost';
  return other.toString();
}

if (STORES.includes('postgres')) {
  describe('migrations through MIGRATION_DATABASE_URL (PostgreSQL)', () => {
    let served: TestDatabase;
    let other: TestDatabase;
    before(async () => {
      served = await createTestDatabase('postgres');
      other = await createTestDatabase('postgres');
    });
    after(async () => {
      await served.drop();
      await other.drop();
    });

    test('a URL that reaches another database is refused, naming both, and nothing is applied', async () => {
      const result = await runCli(['migrate'], {
        DATABASE_URL: served.url,
        MIGRATION_DATABASE_URL: other.url,
      });
      assert.equal(result.code, 1);
      const names = [served.url, other.url].map((url) => new URL(url).pathname.slice(1));
      assert.match(
        result.stderr,
        new RegExp(
          `MIGRATION_DATABASE_URL reaches database "${names[1]}" but DATABASE_URL reaches "${names[0]}": they must be the same database; nothing was migrated`,
        ),
      );
      assert.deepEqual(await applied(served.url), []);
      assert.deepEqual(await applied(other.url), []);
    });

    test('the migrations run through it when it reaches the same database', async () => {
      const env = { DATABASE_URL: served.url, MIGRATION_DATABASE_URL: otherRoute(served.url) };
      const result = await runCli(['migrate'], env);
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stdout, /^Applied 0001_initial, /);
      assert.deepEqual(await applied(served.url), Object.keys(migrations).sort());

      const again = await runCli(['migrate'], env);
      assert.equal(again.code, 0, again.stderr);
      assert.equal(again.stdout.trim(), 'Database is up to date.');
    });

    test('a URL nothing answers on stops the command before it touches the database', async () => {
      const nowhere = new URL(other.url);
      nowhere.port = '1';
      const result = await runCli(['migrate'], {
        DATABASE_URL: other.url,
        MIGRATION_DATABASE_URL: nowhere.toString(),
      });
      assert.equal(result.code, 1);
      assert.deepEqual(await applied(other.url), []);
    });
  });
}
