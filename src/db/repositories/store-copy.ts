import { CompiledQuery, type Kysely, SqliteAdapter, sql } from 'kysely';
import { copyText, parseCopyText } from '../copy-text.ts';
import { copiedOnPostgres, copyInOnPostgres } from '../database.ts';
import type { Database } from '../schema.ts';
import { repository } from '../store-context.ts';

/**
 * Whole tables read and written in bulk, for `copy-store`, `restore` and `backup`
 * (src/services/store-copy.ts): the catalog of either store, pages of rows as plain values, COPY on
 * PostgreSQL, and the indexes and constraints set aside while a table is loaded. The tables and
 * their columns are read from the database itself, never listed here, so a migration's new table
 * or column is seen as soon as it exists.
 */

/** How a column's values are compared between the stores: every column is one or the other. */
export type ColumnKind = 'integer' | 'text';

export interface TableColumn {
  name: string;
  kind: ColumnKind;
}

/** A value as both stores hold it: text, a whole number, or null. */
export type RowValue = string | number | null;
/** A row as a list of values, in the order of the columns it was read with. */
export type Row = RowValue[];

/** Where a table's next page begins: after this rowid (SQLite) or this primary key (PostgreSQL). */
export type PageCursor = number | RowValue[];

export interface Page {
  rows: Row[];
  /** Null once the table is read to its end. */
  next: PageCursor | null;
}

/** The statements that put back what `setAsideStructures` took away, in order. */
export interface SetAside {
  restore: string[];
}

const isSqlite = (db: Kysely<Database>) => db.getExecutor().adapter instanceof SqliteAdapter;

/** An identifier quoted for both stores. */
const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;

/**
 * The most parameters one SQLite statement takes (SQLITE_MAX_VARIABLE_NUMBER's default since
 * 3.32), and the most rows one INSERT carries: beyond a few hundred, longer statements save nothing.
 */
const SQLITE_MAX_PARAMETERS = 32_766;
const SQLITE_ROWS_PER_INSERT = 500;

async function rowsOf<T>(db: Kysely<Database>, text: string, parameters: unknown[] = []): Promise<T[]> {
  return (await db.executeQuery(CompiledQuery.raw(text, parameters))).rows as T[];
}

function kindOf(table: string, column: string, type: string): ColumnKind {
  if (/int/i.test(type)) return 'integer';
  if (/text|char|clob/i.test(type)) return 'text';
  throw new Error(`column ${table}.${column} is of type ${type}, which copy-store cannot copy`);
}

export const storeCopyRepository = repository('storeCopyRepository', {
  /** Every table of the database (the migration bookkeeping too), by name. */
  async tables(db: Kysely<Database>): Promise<string[]> {
    const rows = isSqlite(db)
      ? await rowsOf<{ name: string }>(
          db,
          "select name from sqlite_master where type = 'table' and name not like 'sqlite\\_%' escape '\\' order by name",
        )
      : await rowsOf<{ name: string }>(
          db,
          "select table_name as name from information_schema.tables where table_schema = current_schema() and table_type = 'BASE TABLE' order by table_name",
        );
    return rows.map((row) => row.name);
  },

  /** The columns of `table`, by name (the order both stores agree on, whatever order they were added in). */
  async columns(db: Kysely<Database>, table: string): Promise<TableColumn[]> {
    const rows = isSqlite(db)
      ? await rowsOf<{ name: string; type: string }>(db, 'select name, type from pragma_table_info(?)', [
          table,
        ])
      : await rowsOf<{ name: string; type: string }>(
          db,
          'select column_name as name, data_type as type from information_schema.columns where table_schema = current_schema() and table_name = $1',
          [table],
        );
    return rows
      .map(({ name, type }) => ({ name, kind: kindOf(table, name, type) }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  },

  /** Each foreign key as the table that holds it and the table it references. */
  async foreignKeys(
    db: Kysely<Database>,
    tables: string[],
  ): Promise<{ table: string; references: string }[]> {
    if (!isSqlite(db)) {
      return rowsOf(
        db,
        "select cl.relname as table, rf.relname as references from pg_constraint c join pg_class cl on cl.oid = c.conrelid join pg_class rf on rf.oid = c.confrelid where c.contype = 'f' and c.connamespace = current_schema()::regnamespace",
      );
    }
    const edges: { table: string; references: string }[] = [];
    for (const table of tables) {
      const rows = await rowsOf<{ references: string }>(
        db,
        'select "table" as "references" from pragma_foreign_key_list(?)',
        [table],
      );
      for (const row of rows) edges.push({ table, references: row.references });
    }
    return edges;
  },

  /** The names of the migrations applied, in order; empty where none ever ran. */
  async appliedMigrations(db: Kysely<Database>): Promise<string[]> {
    if (!(await storeCopyRepository.tables(db)).includes('kysely_migration')) return [];
    const rows = await rowsOf<{ name: string }>(db, 'select name from kysely_migration order by name');
    return rows.map((row) => row.name);
  },

  async hasRows(db: Kysely<Database>, table: string): Promise<boolean> {
    return (await rowsOf(db, `select 1 as one from ${quote(table)} limit 1`)).length > 0;
  },

  async count(db: Kysely<Database>, table: string): Promise<number> {
    const [row] = await rowsOf<{ n: number | string }>(db, `select count(*) as n from ${quote(table)}`);
    return Number(row?.n ?? 0);
  },

  /**
   * Up to `limit` rows of `table` after `after` (null: from the start), their `columns` in order,
   * text as strings and whole numbers as numbers. SQLite reads in rowid order, the order of the
   * table's own B-tree; PostgreSQL in primary-key order (`primaryKey`), each page one
   * `COPY (…) TO STDOUT` turned into values without a row object from the driver.
   */
  async readPage(
    db: Kysely<Database>,
    table: string,
    columns: TableColumn[],
    primaryKey: string[],
    after: PageCursor | null,
    limit: number,
  ): Promise<Page> {
    const list = columns.map((c) => quote(c.name)).join(', ');
    if (isSqlite(db)) {
      const objects = await rowsOf<Record<string, RowValue>>(
        db,
        `select rowid as "__rowid", ${list} from ${quote(table)} where rowid > ? order by rowid limit ?`,
        [after ?? 0, limit],
      );
      const rows = objects.map((object) => columns.map((c) => object[c.name] ?? null));
      const last = objects.at(-1);
      return { rows, next: objects.length < limit || last === undefined ? null : Number(last.__rowid) };
    }
    if (primaryKey.length === 0)
      throw new Error(`table ${table} has no primary key: copy-store cannot page it`);
    const key = primaryKey.map(quote).join(', ');
    const cursor = (after ?? []) as RowValue[];
    const where =
      cursor.length === 0 ? '' : `where (${key}) > (${cursor.map((_, i) => `$${i + 1}`).join(', ')})`;
    const query = copiedOnPostgres(
      CompiledQuery.raw(
        `select ${list} from ${quote(table)} ${where} order by ${key} limit ${limit}`,
        cursor,
      ),
    );
    const [result] = (await db.executeQuery(query)).rows;
    const rows: Row[] = parseCopyText(result?.copy.toString('utf8') ?? '');
    for (const row of rows)
      for (let i = 0; i < columns.length; i += 1)
        if (columns[i]?.kind === 'integer' && row[i] !== null) row[i] = Number(row[i]);
    const keyAt = primaryKey.map((name) => columns.findIndex((c) => c.name === name));
    const last = rows.at(-1);
    return {
      rows,
      next: rows.length < limit || last === undefined ? null : keyAt.map((i) => last[i] ?? null),
    };
  },

  /** The primary key's columns, in order (PostgreSQL; SQLite pages by rowid and needs none). */
  async primaryKey(db: Kysely<Database>, table: string): Promise<string[]> {
    if (isSqlite(db)) return [];
    const rows = await rowsOf<{ name: string }>(
      db,
      'select a.attname as name from pg_index i join pg_attribute a on a.attrelid = i.indrelid and a.attnum = any(i.indkey) where i.indrelid = $1::regclass and i.indisprimary order by array_position(i.indkey::int2[], a.attnum)',
      [quote(table)],
    );
    return rows.map((row) => row.name);
  },

  /** Adds `rows` (values in the order of `columns`) to `table`: COPY on PostgreSQL, INSERTs on SQLite. */
  async insertRows(db: Kysely<Database>, table: string, columns: TableColumn[], rows: Row[]): Promise<void> {
    if (rows.length === 0) return;
    const names = columns.map((c) => c.name);
    if (!isSqlite(db)) {
      const text = copyText(
        rows,
        names.map((_, i) => i),
      );
      await db.executeQuery(copyInOnPostgres(table, names, text));
      return;
    }
    const perStatement = Math.min(SQLITE_ROWS_PER_INSERT, Math.floor(SQLITE_MAX_PARAMETERS / names.length));
    const placeholders = `(${names.map(() => '?').join(', ')})`;
    const head = `insert into ${quote(table)} (${names.map(quote).join(', ')}) values `;
    for (let i = 0; i < rows.length; i += perStatement) {
      const batch = rows.slice(i, i + perStatement);
      // Full batches share one SQL text, so SQLite prepares it once (`withStatementCache`).
      await db.executeQuery(
        CompiledQuery.raw(head + Array(batch.length).fill(placeholders).join(', '), batch.flat()),
      );
    }
  },

  /**
   * Columns whose values the store hands out itself (PostgreSQL identity or serial columns, SQLite
   * AUTOINCREMENT keys), whose counter must be moved past the rows copied in.
   */
  async generatedColumns(db: Kysely<Database>): Promise<{ table: string; column: string }[]> {
    if (!isSqlite(db)) {
      return rowsOf(
        db,
        "select table_name as table, column_name as column from information_schema.columns where table_schema = current_schema() and (is_identity = 'YES' or column_default like 'nextval(%')",
      );
    }
    const tables = await rowsOf<{ name: string }>(
      db,
      "select name from sqlite_master where type = 'table' and sql like '%autoincrement%'",
    );
    const columns: { table: string; column: string }[] = [];
    for (const { name } of tables) {
      const [key] = await rowsOf<{ name: string }>(db, 'select name from pragma_table_info(?) where pk = 1', [
        name,
      ]);
      if (key !== undefined) columns.push({ table: name, column: key.name });
    }
    return columns;
  },

  /** The last value the store handed out for `table`'s generated column (0 if none or unknown). */
  async generatedHigh(db: Kysely<Database>, table: string, column: string): Promise<number> {
    if (isSqlite(db)) {
      const [hasSequence] = await rowsOf(db, "select 1 from sqlite_master where name = 'sqlite_sequence'");
      if (hasSequence === undefined) return 0;
      const [row] = await rowsOf<{ seq: number }>(db, 'select seq from sqlite_sequence where name = ?', [
        table,
      ]);
      return Number(row?.seq ?? 0);
    }
    const [sequence] = await rowsOf<{ name: string | null }>(
      db,
      'select pg_get_serial_sequence($1, $2) as name',
      [quote(table), column],
    );
    if (sequence?.name === null || sequence?.name === undefined) return 0;
    const [row] = await rowsOf<{ high: number | string | null }>(
      db,
      `select case when is_called then last_value else 0 end as high from ${sequence.name}`,
    );
    return Number(row?.high ?? 0);
  },

  /** Moves `table`'s generated column on to at least `value`: the next value handed out is above it. */
  async raiseGenerated(db: Kysely<Database>, table: string, column: string, value: number): Promise<void> {
    if (value <= 0) return;
    if (isSqlite(db)) {
      const updated = await db.executeQuery(
        CompiledQuery.raw('update sqlite_sequence set seq = max(seq, ?) where name = ?', [value, table]),
      );
      if (Number(updated.numAffectedRows ?? 0) === 0)
        await db.executeQuery(
          CompiledQuery.raw('insert into sqlite_sequence (name, seq) values (?, ?)', [table, value]),
        );
      return;
    }
    await rowsOf(db, 'select setval(pg_get_serial_sequence($1, $2), $3)', [quote(table), column, value]);
  },

  /**
   * Takes away what makes each row of a bulk load cost more than its own bytes: the indexes of
   * `tables` (and on PostgreSQL their primary and unique keys, and every foreign key, which a key
   * dropped would otherwise hold on to), to build them again in one pass each (`restoreStructures`)
   * once the rows are in. Their definitions come from the catalog: a later migration's index is put
   * back as it was made. In the caller's transaction, so a copy that fails leaves them in place.
   */
  async setAsideStructures(db: Kysely<Database>, tables: string[]): Promise<SetAside> {
    if (isSqlite(db)) {
      const indexes = await rowsOf<{ name: string; sql: string }>(
        db,
        `select name, sql from sqlite_master where type = 'index' and sql is not null and tbl_name in (${tables.map(() => '?').join(', ')})`,
        tables,
      );
      for (const index of indexes) await rowsOf(db, `drop index ${quote(index.name)}`);
      return { restore: indexes.map((index) => index.sql) };
    }
    // Building a million-row index wants more than the 64 MB default to sort in memory.
    await rowsOf(db, "set local maintenance_work_mem = '256MB'");
    const constraints = await rowsOf<{ table: string; name: string; def: string; type: string }>(
      db,
      "select c.conrelid::regclass::text as table, quote_ident(c.conname) as name, pg_get_constraintdef(c.oid) as def, c.contype as type from pg_constraint c join pg_class t on t.oid = c.conrelid where c.connamespace = current_schema()::regnamespace and (c.contype = 'f' or (c.contype in ('p', 'u') and t.relname = any($1)))",
      [tables],
    );
    const indexes = await rowsOf<{ name: string; def: string }>(
      db,
      "select x.indexrelid::regclass::text as name, pg_get_indexdef(x.indexrelid) as def from pg_index x join pg_class t on t.oid = x.indrelid where t.relnamespace = current_schema()::regnamespace and t.relname = any($1) and not exists (select 1 from pg_constraint c where c.conindid = x.indexrelid and c.conrelid = x.indrelid and c.contype in ('p', 'u', 'x'))",
      [tables],
    );
    const foreign = constraints.filter((c) => c.type === 'f');
    const keys = constraints.filter((c) => c.type !== 'f');
    for (const c of foreign) await rowsOf(db, `alter table ${c.table} drop constraint ${c.name}`);
    for (const index of indexes) await rowsOf(db, `drop index ${index.name}`);
    for (const c of keys) await rowsOf(db, `alter table ${c.table} drop constraint ${c.name}`);
    return {
      restore: [
        ...keys.map((c) => `alter table ${c.table} add constraint ${c.name} ${c.def}`),
        ...indexes.map((index) => index.def),
        ...foreign.map((c) => `alter table ${c.table} add constraint ${c.name} ${c.def}`),
      ],
    };
  },

  /** Builds again what `setAsideStructures` took away; a foreign key or unique key a row breaks fails here. */
  async restoreStructures(db: Kysely<Database>, setAside: SetAside): Promise<void> {
    for (const statement of setAside.restore) await rowsOf(db, statement);
  },

  /** Rows that break a foreign key (SQLite, whose bulk writes leave them unchecked); 0 on PostgreSQL. */
  async foreignKeyViolations(db: Kysely<Database>): Promise<number> {
    if (!isSqlite(db)) return 0;
    return (await rowsOf(db, 'select 1 from pragma_foreign_key_check')).length;
  },

  /** Deletes every row of `tables` (in the caller's transaction). */
  async emptyTables(db: Kysely<Database>, tables: string[]): Promise<void> {
    if (tables.length === 0) return;
    if (!isSqlite(db)) {
      await rowsOf(db, `truncate table ${tables.map(quote).join(', ')}`);
      return;
    }
    for (const table of tables) await rowsOf(db, `delete from ${quote(table)}`);
  },

  /**
   * What tells two PostgreSQL databases apart: the name and the server's start time, the same for
   * every URL that reaches them (another host name, a pooler).
   */
  async postgresIdentity(db: Kysely<Database>): Promise<string> {
    const [row] = await rowsOf<{ identity: string }>(
      db,
      "select current_database() || ' ' || pg_postmaster_start_time()::text as identity",
    );
    return row?.identity ?? '';
  },

  /** SQLite: what `PRAGMA quick_check` finds wrong with the database file; empty when nothing. */
  async integrityProblems(db: Kysely<Database>): Promise<string[]> {
    const rows = await rowsOf<{ quick_check: string }>(db, 'pragma quick_check');
    return rows.map((row) => row.quick_check).filter((line) => line !== 'ok');
  },

  /**
   * SQLite: writes the whole database as of one moment into a new file at `path` (`VACUUM INTO`):
   * one read transaction, so writers go on meanwhile (WAL) and the copy is never restarted.
   */
  async vacuumInto(db: Kysely<Database>, path: string): Promise<void> {
    await sql`vacuum into ${path}`.execute(db);
  },
});
