import { realpathSync } from 'node:fs';
import { CompiledQuery, type Kysely, sql } from 'kysely';
import type { Database } from '../schema.ts';
import type {
  Page,
  PageCursor,
  Row,
  RowValue,
  SetAside,
  Store,
  StoreBackup,
  StoreCopy,
  TableColumn,
} from '../store.ts';
import { sqliteSnapshots } from './snapshots.ts';

/**
 * SQLite's catalog and bulk table reads and writes, for `copy-store`, `restore` and `backup`
 * (src/db/repositories/store-copy.ts).
 */

/**
 * The most parameters one SQLite statement takes (SQLITE_MAX_VARIABLE_NUMBER's default since
 * 3.32), and the most rows one INSERT carries: beyond a few hundred, longer statements save nothing.
 */
const SQLITE_MAX_PARAMETERS = 32_766;
const SQLITE_ROWS_PER_INSERT = 500;

/** An identifier quoted for both stores. */
const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;

async function rowsOf<T>(db: Kysely<Database>, text: string, parameters: unknown[] = []): Promise<T[]> {
  return (await db.executeQuery(CompiledQuery.raw(text, parameters))).rows as T[];
}

/** `path`: the database file, or `:memory:`. */
export function sqliteCopy(path: string): StoreCopy {
  return {
    async identity() {
      return `sqlite:${path === ':memory:' ? path : realpathSync(path)}`;
    },

    async tables(db) {
      const rows = await rowsOf<{ name: string }>(
        db,
        "select name from sqlite_master where type = 'table' and name not like 'sqlite\\_%' escape '\\' order by name",
      );
      return rows.map((row) => row.name);
    },

    async columnTypes(db, table) {
      return rowsOf<{ name: string; type: string }>(db, 'select name, type from pragma_table_info(?)', [
        table,
      ]);
    },

    async foreignKeys(db, tables) {
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

    /** In rowid order, the order of the table's own B-tree. */
    async readPage(
      db: Kysely<Database>,
      table: string,
      columns: TableColumn[],
      _primaryKey: string[],
      after: PageCursor | null,
      limit: number,
    ): Promise<Page> {
      const list = columns.map((c) => quote(c.name)).join(', ');
      const objects = await rowsOf<Record<string, RowValue>>(
        db,
        `select rowid as "__rowid", ${list} from ${quote(table)} where rowid > ? order by rowid limit ?`,
        [after ?? 0, limit],
      );
      const rows: Row[] = objects.map((object) => columns.map((c) => object[c.name] ?? null));
      const last = objects.at(-1);
      return { rows, next: objects.length < limit || last === undefined ? null : Number(last.__rowid) };
    },

    /** SQLite pages by rowid and needs none. */
    async primaryKey() {
      return [];
    },

    async insertRows(db, table, columns, rows) {
      const names = columns.map((c) => c.name);
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

    /** AUTOINCREMENT keys. */
    async generatedColumns(db) {
      const tables = await rowsOf<{ name: string }>(
        db,
        "select name from sqlite_master where type = 'table' and sql like '%autoincrement%'",
      );
      const columns: { table: string; column: string }[] = [];
      for (const { name } of tables) {
        const [key] = await rowsOf<{ name: string }>(
          db,
          'select name from pragma_table_info(?) where pk = 1',
          [name],
        );
        if (key !== undefined) columns.push({ table: name, column: key.name });
      }
      return columns;
    },

    async generatedHigh(db, table) {
      const [hasSequence] = await rowsOf(db, "select 1 from sqlite_master where name = 'sqlite_sequence'");
      if (hasSequence === undefined) return 0;
      const [row] = await rowsOf<{ seq: number }>(db, 'select seq from sqlite_sequence where name = ?', [
        table,
      ]);
      return Number(row?.seq ?? 0);
    },

    async raiseGenerated(db, table, _column, value) {
      const updated = await db.executeQuery(
        CompiledQuery.raw('update sqlite_sequence set seq = max(seq, ?) where name = ?', [value, table]),
      );
      if (Number(updated.numAffectedRows ?? 0) === 0)
        await db.executeQuery(
          CompiledQuery.raw('insert into sqlite_sequence (name, seq) values (?, ?)', [table, value]),
        );
    },

    /** The indexes of `tables`. */
    async setAsideStructures(db, tables): Promise<SetAside> {
      const indexes = await rowsOf<{ name: string; sql: string }>(
        db,
        `select name, sql from sqlite_master where type = 'index' and sql is not null and tbl_name in (${tables.map(() => '?').join(', ')})`,
        tables,
      );
      for (const index of indexes) await rowsOf(db, `drop index ${quote(index.name)}`);
      return { restore: indexes.map((index) => index.sql) };
    },

    /** Bulk writes leave foreign keys unchecked (`withBulkWriteSettings`): the rows that break one. */
    async foreignKeyViolations(db) {
      return (await rowsOf(db, 'select 1 from pragma_foreign_key_check')).length;
    },

    async emptyTables(db, tables) {
      for (const table of tables) await rowsOf(db, `delete from ${quote(table)}`);
    },
  };
}

/** `path`: the database file, or `:memory:`; `store`: the store of the snapshots it opens. */
export function sqliteBackup(path: string, store: Store): StoreBackup {
  return {
    path: path === ':memory:' ? null : path,

    snapshotOfFile: (file) => sqliteSnapshots(file, store).open(),

    /**
     * `VACUUM INTO`: one read transaction, so writers go on meanwhile (WAL) and the copy is never
     * restarted.
     */
    async vacuumInto(db, file) {
      await sql`vacuum into ${file}`.execute(db);
    },

    /** What `PRAGMA quick_check` finds wrong. */
    async integrityProblems(db) {
      const rows = await rowsOf<{ quick_check: string }>(db, 'pragma quick_check');
      return rows.map((row) => row.quick_check).filter((line) => line !== 'ok');
    },
  };
}
