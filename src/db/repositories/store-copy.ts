import { CompiledQuery, type Kysely } from 'kysely';
import type { Database } from '../schema.ts';
import {
  type ColumnKind,
  type Page,
  type PageCursor,
  type Row,
  type SetAside,
  storeFor,
  type TableColumn,
} from '../store.ts';
import { repository } from '../store-context.ts';

/**
 * Whole tables read and written in bulk, for `copy-store`, `restore` and `backup`
 * (src/services/store-copy.ts): the catalog of either store, pages of rows as plain values, COPY on
 * PostgreSQL, and the indexes and constraints set aside while a table is loaded. The tables and
 * their columns are read from the database itself, never listed here, so a migration's new table
 * or column is seen as soon as it exists. What differs between the stores is the store's
 * (`Store.copy`, `Store.backup`).
 */

export type { ColumnKind, Page, PageCursor, Row, RowValue, SetAside, TableColumn } from '../store.ts';

/** An identifier quoted for both stores. */
const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;

async function rowsOf<T>(db: Kysely<Database>, text: string, parameters: unknown[] = []): Promise<T[]> {
  return (await db.executeQuery(CompiledQuery.raw(text, parameters))).rows as T[];
}

function kindOf(table: string, column: string, type: string): ColumnKind {
  if (/int/i.test(type)) return 'integer';
  if (/text|char|clob/i.test(type)) return 'text';
  throw new Error(`column ${table}.${column} is of type ${type}, which copy-store cannot copy`);
}

function backupOf(db: Kysely<Database>) {
  const backup = storeFor(db).backup;
  if (backup === null) throw new Error('this store has no backup of its own');
  return backup;
}

export const storeCopyRepository = repository('storeCopyRepository', {
  /** What tells two databases apart: the same for every URL that reaches one. */
  async identity(db: Kysely<Database>): Promise<string> {
    return storeFor(db).copy.identity(db);
  },

  /** Every table of the database (the migration bookkeeping too), by name. */
  async tables(db: Kysely<Database>): Promise<string[]> {
    return storeFor(db).copy.tables(db);
  },

  /** The columns of `table`, by name (the order both stores agree on, whatever order they were added in). */
  async columns(db: Kysely<Database>, table: string): Promise<TableColumn[]> {
    const rows = await storeFor(db).copy.columnTypes(db, table);
    return rows
      .map(({ name, type }) => ({ name, kind: kindOf(table, name, type) }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  },

  /** Each foreign key as the table that holds it and the table it references. */
  async foreignKeys(
    db: Kysely<Database>,
    tables: string[],
  ): Promise<{ table: string; references: string }[]> {
    return storeFor(db).copy.foreignKeys(db, tables);
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
    return storeFor(db).copy.readPage(db, table, columns, primaryKey, after, limit);
  },

  /** The primary key's columns, in order (PostgreSQL; SQLite pages by rowid and needs none). */
  async primaryKey(db: Kysely<Database>, table: string): Promise<string[]> {
    return storeFor(db).copy.primaryKey(db, table);
  },

  /** Adds `rows` (values in the order of `columns`) to `table`: COPY on PostgreSQL, INSERTs on SQLite. */
  async insertRows(db: Kysely<Database>, table: string, columns: TableColumn[], rows: Row[]): Promise<void> {
    if (rows.length === 0) return;
    await storeFor(db).copy.insertRows(db, table, columns, rows);
  },

  /**
   * Columns whose values the store hands out itself (PostgreSQL identity or serial columns, SQLite
   * AUTOINCREMENT keys), whose counter must be moved past the rows copied in.
   */
  async generatedColumns(db: Kysely<Database>): Promise<{ table: string; column: string }[]> {
    return storeFor(db).copy.generatedColumns(db);
  },

  /** The last value the store handed out for `table`'s generated column (0 if none or unknown). */
  async generatedHigh(db: Kysely<Database>, table: string, column: string): Promise<number> {
    return storeFor(db).copy.generatedHigh(db, table, column);
  },

  /** Moves `table`'s generated column on to at least `value`: the next value handed out is above it. */
  async raiseGenerated(db: Kysely<Database>, table: string, column: string, value: number): Promise<void> {
    if (value <= 0) return;
    await storeFor(db).copy.raiseGenerated(db, table, column, value);
  },

  /**
   * Takes away what makes each row of a bulk load cost more than its own bytes: the indexes of
   * `tables` (and on PostgreSQL their primary and unique keys, and every foreign key, which a key
   * dropped would otherwise hold on to), to build them again in one pass each (`restoreStructures`)
   * once the rows are in. Their definitions come from the catalog: a later migration's index is put
   * back as it was made. In the caller's transaction, so a copy that fails leaves them in place.
   */
  async setAsideStructures(db: Kysely<Database>, tables: string[]): Promise<SetAside> {
    return storeFor(db).copy.setAsideStructures(db, tables);
  },

  /** Builds again what `setAsideStructures` took away; a foreign key or unique key a row breaks fails here. */
  async restoreStructures(db: Kysely<Database>, setAside: SetAside): Promise<void> {
    for (const statement of setAside.restore) await rowsOf(db, statement);
  },

  /** Rows that break a foreign key (SQLite, whose bulk writes leave them unchecked); 0 on PostgreSQL. */
  async foreignKeyViolations(db: Kysely<Database>): Promise<number> {
    return storeFor(db).copy.foreignKeyViolations(db);
  },

  /** Deletes every row of `tables` (in the caller's transaction). */
  async emptyTables(db: Kysely<Database>, tables: string[]): Promise<void> {
    if (tables.length === 0) return;
    await storeFor(db).copy.emptyTables(db, tables);
  },

  /** SQLite: what `PRAGMA quick_check` finds wrong with the database file; empty when nothing. */
  async integrityProblems(db: Kysely<Database>): Promise<string[]> {
    return backupOf(db).integrityProblems(db);
  },

  /**
   * SQLite: writes the whole database as of one moment into a new file at `path` (`VACUUM INTO`):
   * one read transaction, so writers go on meanwhile (WAL) and the copy is never restarted.
   */
  async vacuumInto(db: Kysely<Database>, path: string): Promise<void> {
    await backupOf(db).vacuumInto(db, path);
  },
});
