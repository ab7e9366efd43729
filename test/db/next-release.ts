/**
 * The next release of `safety-api`, for the upgrade tests (test/db/upgrades.test.ts): this code
 * with one more migration, added here as the next release would add it, then the usual command
 * line: `node test/db/next-release.ts serve|migrate|…`.
 *
 * NEXT_RELEASE_MIGRATION:
 * - `additive`: `9000_next_release_notes`, a new table (with a row for each run of the migration:
 *   the process that ran it), a nullable column and an index.
 * - `breaking`: `9000_next_release_rename`, renames `incidents.description`, which this release reads.
 *
 * NEXT_RELEASE_GATE=stdin: the migration says `next-release: migrating` on standard error, then
 * waits for a line on standard input before it goes on, so that a test can start another process
 * while this one holds the migration lock.
 */
import { once } from 'node:events';
import { type Kysely, sql } from 'kysely';
import { main } from '../../src/cli/main.ts';
import { migrations } from '../../src/db/migrate.ts';

async function gate(): Promise<void> {
  if (process.env.NEXT_RELEASE_GATE !== 'stdin') return;
  process.stderr.write('next-release: migrating\n');
  await once(process.stdin, 'data');
  process.stdin.pause();
}

const kind = process.env.NEXT_RELEASE_MIGRATION;
if (kind === 'additive') {
  migrations['9000_next_release_notes'] = {
    additive: true,
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('next_release_notes')
        .addColumn('pid', 'integer', (c) => c.notNull())
        .execute();
      await sql`insert into next_release_notes (pid) values (${process.pid})`.execute(db);
      await db.schema.alterTable('incidents').addColumn('next_release_note', 'text').execute();
      await db.schema
        .createIndex('incidents_next_release_note')
        .on('incidents')
        .column('next_release_note')
        .execute();
      await gate();
    },
  };
} else if (kind === 'breaking') {
  migrations['9000_next_release_rename'] = {
    additive: false,
    async up(db: Kysely<unknown>) {
      await db.schema.alterTable('incidents').renameColumn('description', 'details').execute();
      await gate();
    },
  };
} else {
  throw new Error(`NEXT_RELEASE_MIGRATION must be additive or breaking (got "${kind}")`);
}

process.exitCode = await main(process.argv.slice(2));
