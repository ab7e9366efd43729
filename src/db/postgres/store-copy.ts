import { CompiledQuery, type Kysely } from 'kysely';
import { copyText, parseCopyText } from '../copy-text.ts';
import type { Database } from '../schema.ts';
import type { Page, PageCursor, Row, RowValue, SetAside, StoreCopy, TableColumn } from '../store.ts';
import type { CopiedIn, CopiedRows } from './client.ts';

/**
 * PostgreSQL's catalog and bulk table reads and writes, for `copy-store` and `restore`
 * (src/db/repositories/store-copy.ts): COPY both ways, and the keys and indexes set aside while a
 * table is loaded.
 */

/** An identifier quoted for both stores. */
const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;

async function rowsOf<T>(db: Kysely<Database>, text: string, parameters: unknown[] = []): Promise<T[]> {
  return (await db.executeQuery(CompiledQuery.raw(text, parameters))).rows as T[];
}

/** The store's COPY: `copied` runs a query as `COPY (…) TO STDOUT`, `copyIn` makes a `COPY … FROM STDIN`. */
export function postgresCopy(
  copied: (query: CompiledQuery) => CompiledQuery<CopiedRows>,
  copyIn: (table: string, columns: readonly string[], data: string) => CompiledQuery<CopiedIn>,
): StoreCopy {
  return {
    /**
     * The name and the server's start time, the same for every URL that reaches the database
     * (another host name, a pooler).
     */
    async identity(db) {
      const [row] = await rowsOf<{ identity: string }>(
        db,
        "select current_database() || ' ' || pg_postmaster_start_time()::text as identity",
      );
      return `postgres:${row?.identity ?? ''}`;
    },

    async tables(db) {
      const rows = await rowsOf<{ name: string }>(
        db,
        "select table_name as name from information_schema.tables where table_schema = current_schema() and table_type = 'BASE TABLE' order by table_name",
      );
      return rows.map((row) => row.name);
    },

    async columnTypes(db, table) {
      return rowsOf<{ name: string; type: string }>(
        db,
        'select column_name as name, data_type as type from information_schema.columns where table_schema = current_schema() and table_name = $1',
        [table],
      );
    },

    async foreignKeys(db) {
      return rowsOf<{ table: string; references: string }>(
        db,
        "select cl.relname as table, rf.relname as references from pg_constraint c join pg_class cl on cl.oid = c.conrelid join pg_class rf on rf.oid = c.confrelid where c.contype = 'f' and c.connamespace = current_schema()::regnamespace",
      );
    },

    /** In primary-key order, each page one `COPY (…) TO STDOUT` turned into values without a row object from the driver. */
    async readPage(
      db: Kysely<Database>,
      table: string,
      columns: TableColumn[],
      primaryKey: string[],
      after: PageCursor | null,
      limit: number,
    ): Promise<Page> {
      if (primaryKey.length === 0)
        throw new Error(`table ${table} has no primary key: copy-store cannot page it`);
      const list = columns.map((c) => quote(c.name)).join(', ');
      const key = primaryKey.map(quote).join(', ');
      const cursor = (after ?? []) as RowValue[];
      const where =
        cursor.length === 0 ? '' : `where (${key}) > (${cursor.map((_, i) => `$${i + 1}`).join(', ')})`;
      const query = copied(
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

    async primaryKey(db, table) {
      const rows = await rowsOf<{ name: string }>(
        db,
        'select a.attname as name from pg_index i join pg_attribute a on a.attrelid = i.indrelid and a.attnum = any(i.indkey) where i.indrelid = $1::regclass and i.indisprimary order by array_position(i.indkey::int2[], a.attnum)',
        [quote(table)],
      );
      return rows.map((row) => row.name);
    },

    /** One COPY. */
    async insertRows(db, table, columns, rows) {
      const names = columns.map((c) => c.name);
      const text = copyText(
        rows,
        names.map((_, i) => i),
      );
      await db.executeQuery(copyIn(table, names, text));
    },

    /** Identity or serial columns. */
    async generatedColumns(db) {
      return rowsOf<{ table: string; column: string }>(
        db,
        "select table_name as table, column_name as column from information_schema.columns where table_schema = current_schema() and (is_identity = 'YES' or column_default like 'nextval(%')",
      );
    },

    async generatedHigh(db, table, column) {
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

    async raiseGenerated(db, table, column, value) {
      await rowsOf(db, 'select setval(pg_get_serial_sequence($1, $2), $3)', [quote(table), column, value]);
    },

    /**
     * The indexes of `tables`, their primary and unique keys, and every foreign key, which a key
     * dropped would otherwise hold on to.
     */
    async setAsideStructures(db, tables): Promise<SetAside> {
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

    /** Foreign keys are checked as rows are written. */
    async foreignKeyViolations() {
      return 0;
    },

    async emptyTables(db, tables) {
      await rowsOf(db, `truncate table ${tables.map(quote).join(', ')}`);
    },
  };
}
