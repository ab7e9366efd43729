import { type Kysely, sql } from 'kysely';

/**
 * The changes feed and deletions (docs/architecture.md, "Changes and deletions").
 *
 * - Every public record (incidents, users, departments, locations) gets `change_seq`, the feed
 *   position of its latest change, and `changed_at`. The account's `data_version` is the last seq
 *   given out, so a writer numbers its changes `data_version + 1, + 2, …` and the feed is a range
 *   read on (account_id, change_seq) per table.
 * - A deleted incident leaves a row in `incident_tombstones` with the seq of its deletion, until
 *   `CHANGES_RETENTION_DAYS` have passed; `changes_purged_seq` is the last seq purged, below which
 *   a cursor may have missed a deletion.
 * - `incident_blocks` keeps paging by position an index range read after deletions: positions fall
 *   into fixed blocks, and a block that lost rows is listed with the number it still holds.
 * - `oauth_keys` becomes `generated_secrets`: the feed's cursor key is generated and kept the same
 *   way as the OAuth keys.
 *
 * Rows that exist get seqs 1…n per account (incidents in position order, then users, departments
 * and locations by id), and `data_version` moves past them.
 */

const RECORD_TABLES = ['incidents', 'users', 'departments', 'locations'] as const;

// Renames `oauth_keys`, which the previous release reads, and numbers changes the previous
// release would write without a seq.
export const additive = false;

export async function up(db: Kysely<unknown>): Promise<void> {
  const now = new Date().toISOString();
  await db.schema.alterTable('oauth_keys').renameTo('generated_secrets').execute();

  await db.schema
    .alterTable('accounts')
    .addColumn('changes_purged_seq', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();

  for (const table of RECORD_TABLES) {
    await db.schema
      .alterTable(table)
      .addColumn('change_seq', 'integer', (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema
      .alterTable(table)
      .addColumn('changed_at', 'text', (c) => c.notNull().defaultTo(now))
      .execute();
  }

  const { rows: accounts } = await sql<{ id: string }>`select id from accounts`.execute(db);
  for (const { id } of accounts) {
    await sql`update incidents set change_seq = position where account_id = ${id}`.execute(db);
    const { rows: top } = await sql<{ n: number | string | null }>`
      select max(position) as n from incidents where account_id = ${id}`.execute(db);
    let offset = Number(top[0]?.n ?? 0);
    for (const table of RECORD_TABLES.slice(1)) {
      await sql`
        update ${sql.table(table)} set change_seq = ranked.rn + ${offset}
        from (
          select id, row_number() over (order by id) as rn
          from ${sql.table(table)} where account_id = ${id}
        ) as ranked
        where ${sql.ref(`${table}.id`)} = ranked.id`.execute(db);
      const { rows: count } = await sql<{ n: number | string }>`
        select count(*) as n from ${sql.table(table)} where account_id = ${id}`.execute(db);
      offset += Number(count[0]?.n ?? 0);
    }
    await sql`update accounts set data_version = data_version + ${offset} where id = ${id}`.execute(db);
  }

  for (const table of RECORD_TABLES) {
    await db.schema
      .createIndex(`${table}_account_change`)
      .on(table)
      .columns(['account_id', 'change_seq'])
      .execute();
  }

  await db.schema
    .createTable('incident_tombstones')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('change_seq', 'integer', (c) => c.notNull())
    .addColumn('changed_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('incident_tombstones_account_change')
    .on('incident_tombstones')
    .columns(['account_id', 'change_seq'])
    .execute();

  await db.schema
    .createTable('incident_blocks')
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('block', 'integer', (c) => c.notNull())
    .addColumn('live', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('incident_blocks_pk', ['account_id', 'block'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('incident_blocks').execute();
  await db.schema.dropTable('incident_tombstones').execute();
  for (const table of RECORD_TABLES) {
    await db.schema.dropIndex(`${table}_account_change`).execute();
    await db.schema.alterTable(table).dropColumn('changed_at').execute();
    await db.schema.alterTable(table).dropColumn('change_seq').execute();
  }
  await db.schema.alterTable('accounts').dropColumn('changes_purged_seq').execute();
  await db.schema.alterTable('generated_secrets').renameTo('oauth_keys').execute();
}
