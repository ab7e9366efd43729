import { hash } from 'node:crypto';
import {
  closeSync,
  copyFileSync,
  existsSync,
  mkdtempSync,
  openSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import {
  type DatabaseHandle,
  databaseFile,
  isDatabaseUrl,
  isInMemory,
  openDatabase,
  shownDatabaseUrl,
} from '../db/database.ts';
import { migrations, migrateToLatest } from '../db/migrate.ts';
import { MIGRATION_TABLES } from '../db/repositories/migration-state.ts';
import {
  type PageCursor,
  type Row,
  type RowValue,
  storeCopyRepository,
  type TableColumn,
} from '../db/repositories/store-copy.ts';
import type { Database } from '../db/schema.ts';
import type { Snapshot } from '../db/snapshot.ts';
import { InputError } from '../errors.ts';

/**
 * `safety-api copy-store` (and `restore`, which is a copy from a backup file): every table of one
 * store, as one consistent snapshot of it, into an empty store of either kind, then checked row
 * for row against the snapshot by count and checksum before anything is committed.
 */

/**
 * What becomes of each table of the schema. Typed by schema.ts, so a table added there does not
 * compile until it is placed here; and `copyStore` refuses a database holding a table that is
 * neither here nor migration bookkeeping (a migration's table missing from schema.ts), so one can
 * never be left behind unseen. test/cli/copy-store.test.ts holds the migrated schema to it.
 */
export const TABLE_PLAN: Record<keyof Database, 'copy' | { excluded: string }> = {
  accounts: 'copy',
  departments: 'copy',
  locations: 'copy',
  users: 'copy',
  incidents: 'copy',
  incident_tombstones: 'copy',
  incident_blocks: 'copy',
  api_keys: 'copy',
  key_usage: 'copy',
  audit_events: 'copy',
  admin_sessions: {
    excluded: 'browsers signed in to the admin panel of this deployment: they sign in again on the new one',
  },
  oauth_clients: 'copy',
  oauth_payloads: 'copy',
  generated_secrets: 'copy',
  webhook_endpoints: 'copy',
  webhook_attempts: 'copy',
  webhook_acknowledged: 'copy',
  // Copied: the new store does not tell again what the old one told.
  mail_notices: 'copy',
};

/** Rows per page read and per batch written: a few MB, whatever the table's size. */
const PAGE_ROWS = 5_000;

/** The tables copied, by name. */
export const COPIED_TABLES = (Object.keys(TABLE_PLAN) as (keyof Database)[]).filter(
  (table) => TABLE_PLAN[table] === 'copy',
);

/**
 * A table's rows summed up independently of their order and of the store: each row's values in
 * column-name order, text as text and whole numbers as numbers (both stores hold booleans as 0/1
 * and timestamps and JSON as text, schema.ts), written as JSON and hashed with SHA-256; the
 * digests are added up in four 32-bit lanes. A row missing, added, duplicated or changed in any
 * value changes the sum.
 */
export class TableChecksum {
  rows = 0;
  private readonly lanes = [0, 0, 0, 0];

  add(row: Row): void {
    const digest = hash('sha256', JSON.stringify(row), 'buffer');
    for (let i = 0; i < 4; i += 1)
      this.lanes[i] = ((this.lanes[i] as number) + digest.readUInt32BE(i * 4)) >>> 0;
    this.rows += 1;
  }

  get hex(): string {
    return this.lanes.map((lane) => lane.toString(16).padStart(8, '0')).join('');
  }
}

export interface TableReport {
  table: string;
  /** In the source's snapshot. */
  rows: number;
  checksum: string;
  /** In the target, read back before the commit. */
  targetRows: number;
  targetChecksum: string;
  /** The time its rows took to copy. */
  ms: number;
}

export const tableMatches = (report: TableReport): boolean =>
  report.rows === report.targetRows && report.checksum === report.targetChecksum;

/** The target did not hold what the snapshot held: nothing was committed. */
export class CopyVerificationError extends Error {
  override name = 'CopyVerificationError';
  readonly tables: TableReport[];

  constructor(tables: TableReport[]) {
    super(
      `the target did not match the snapshot (${tables
        .filter((t) => !tableMatches(t))
        .map((t) => t.table)
        .join(', ')}): nothing was committed, the target is as it was`,
    );
    this.tables = tables;
  }
}

export interface CopyOptions {
  from: string;
  to: string;
  /** Empties a target that holds data, in the copy's transaction; without it such a target is refused. */
  replace?: boolean;
  /** Migrates the source first (`restore`, whose source is a private copy of a backup file). */
  migrateSource?: boolean;
  /** After each page written. */
  onProgress?(table: string, copied: number, total: number): void;
  /** After each table's rows are written. */
  onTableCopied?(table: string, rows: number, ms: number): void;
}

export interface CopyResult {
  tables: TableReport[];
  /** Rows copied, in all tables. */
  rows: number;
  ms: number;
}

/** `sqlite:PATH` or `postgres://…`, as DATABASE_URL takes them; anything else is an InputError. */
export function checkStoreUrl(option: string, url: string): void {
  if (!isDatabaseUrl(url))
    throw new InputError(`${option} must be sqlite:PATH or postgres://… (got "${url}")`);
  if (isInMemory(url)) throw new InputError(`${option}: an in-memory database cannot be copied`);
}

/** A URL as it may be shown: without its password. */
export function shownUrl(url: string): string {
  return shownDatabaseUrl(url);
}

/** The copied tables in an order where each comes after the tables its foreign keys reference. */
function loadOrder(tables: string[], edges: { table: string; references: string }[]): string[] {
  const ordered: string[] = [];
  const visiting = new Set<string>();
  const visit = (table: string) => {
    if (ordered.includes(table) || visiting.has(table)) return;
    visiting.add(table);
    for (const edge of edges)
      if (edge.table === table && edge.references !== table && tables.includes(edge.references))
        visit(edge.references);
    ordered.push(table);
  };
  for (const table of tables) visit(table);
  return ordered;
}

/** A value as the checksum and the target take it: text as text, an integer column's as a number. */
function canonical(table: string, column: TableColumn, value: RowValue | bigint | undefined): RowValue {
  if (value === null || value === undefined) return null;
  if (column.kind === 'text') return typeof value === 'string' ? value : String(value);
  const number = Number(value);
  if (!Number.isSafeInteger(number))
    throw new Error(
      `${table}.${column.name} holds ${JSON.stringify(String(value))}, which is not a whole number`,
    );
  return number;
}

/** Every page of `table`, from the first; `read` is `storeCopyRepository.readPage` on one handle. */
async function* pagesOf(db: Snapshot['db'], table: string, columns: TableColumn[]): AsyncGenerator<Row[]> {
  const primaryKey = await storeCopyRepository.primaryKey(db, table);
  let after: PageCursor | null = null;
  for (;;) {
    const page = await storeCopyRepository.readPage(db, table, columns, primaryKey, after, PAGE_ROWS);
    for (const row of page.rows)
      for (let i = 0; i < columns.length; i += 1)
        row[i] = canonical(table, columns[i] as TableColumn, row[i]);
    if (page.rows.length > 0) yield page.rows;
    if (page.next === null) return;
    after = page.next;
  }
}

async function sameDatabase(source: DatabaseHandle, target: DatabaseHandle) {
  const [a, b] = await Promise.all([
    storeCopyRepository.identity(source.db),
    storeCopyRepository.identity(target.db),
  ]);
  return a === b;
}

/**
 * Copies every table of TABLE_PLAN marked `copy` from one snapshot of `from` into `to`. The target
 * must hold no row in any table (or `replace` must be given); it is migrated first, then written in
 * one transaction: indexes and keys set aside and built again once the rows are in, generated ids'
 * counters moved past the copied ones, and every table read back and compared with the snapshot by
 * count and checksum before the commit. Whatever fails, or a process killed half-way, leaves the
 * target without a copied row. The source is only read: it serves and takes imports meanwhile.
 */
export async function copyStore(options: CopyOptions): Promise<CopyResult> {
  const started = performance.now();
  checkStoreUrl('--from', options.from);
  checkStoreUrl('--to', options.to);
  const sourceFile = databaseFile(options.from);
  if (sourceFile !== null && !existsSync(sourceFile))
    throw new InputError(`--from: no database at ${sourceFile}`);

  const source = openDatabase(options.from);
  let target: DatabaseHandle | null = null;
  let snapshot: Snapshot | null = null;
  try {
    target = openDatabase(options.to);
    if (await sameDatabase(source, target))
      throw new InputError('--from and --to are the same database: nothing was written');
    if (options.migrateSource === true) await migrateToLatest(source.db);

    // Everything about the source is read in the snapshot, from its first statement on.
    snapshot = await source.snapshots.open();
    const applied = await storeCopyRepository.appliedMigrations(snapshot.db);
    const known = Object.keys(migrations);
    if (applied.join() !== known.join()) {
      const behind = applied.every((name) => known.includes(name));
      throw new InputError(
        behind
          ? `the source is not migrated to this version's schema (${applied.at(-1) ?? 'no migration'} of ${known.at(-1)}): run "safety-api migrate" against it first; nothing was written`
          : `the source has migrations this version does not know (${applied.filter((n) => !known.includes(n)).join(', ')}): use the safety-api that wrote it; nothing was written`,
      );
    }
    const sourceTables = await storeCopyRepository.tables(snapshot.db);
    const unplanned = sourceTables.filter((t) => !(t in TABLE_PLAN) && !MIGRATION_TABLES.includes(t));
    if (unplanned.length > 0)
      throw new Error(
        `table ${unplanned.join(', ')} is neither copied nor excluded by copy-store (TABLE_PLAN in src/services/store-copy.ts): nothing was written`,
      );

    const targetTables = (await storeCopyRepository.tables(target.db)).filter(
      (t) => !MIGRATION_TABLES.includes(t),
    );
    const holding: string[] = [];
    for (const table of targetTables)
      if (await storeCopyRepository.hasRows(target.db, table)) holding.push(table);
    if (holding.length > 0 && options.replace !== true)
      throw new InputError(
        `the target is not empty (${holding.slice(0, 4).join(', ')}${holding.length > 4 ? ', …' : ''} hold rows): ` +
          'copy-store writes only into an empty store; nothing was written (--replace empties it first)',
      );

    await migrateToLatest(target.db);
    const tables = loadOrder(
      COPIED_TABLES.filter((t) => sourceTables.includes(t)),
      await storeCopyRepository.foreignKeys(target.db, COPIED_TABLES),
    );
    const columns = new Map<string, TableColumn[]>();
    for (const table of tables) {
      const theirs = await storeCopyRepository.columns(snapshot.db, table);
      const ours = await storeCopyRepository.columns(target.db, table);
      if (theirs.map((c) => c.name).join() !== ours.map((c) => c.name).join())
        throw new Error(
          `table ${table} has other columns in the source than in the target: nothing was written`,
        );
      columns.set(table, theirs);
    }
    const totals = new Map<string, number>();
    for (const table of tables) totals.set(table, await storeCopyRepository.count(snapshot.db, table));
    const generated = await storeCopyRepository.generatedColumns(target.db);
    const generatedHigh = new Map<string, number>();
    for (const { table, column } of generated)
      generatedHigh.set(table, await storeCopyRepository.generatedHigh(snapshot.db, table, column));

    const reports: TableReport[] = [];
    const into = target;
    const from = snapshot;
    await into.store.withBulkWriteSettings(into.db, () =>
      into.db.transaction().execute(async (trx) => {
        if (holding.length > 0) await storeCopyRepository.emptyTables(trx, targetTables);
        const setAside = await storeCopyRepository.setAsideStructures(trx, tables);
        for (const table of tables) {
          const tableStarted = performance.now();
          const tableColumns = columns.get(table) as TableColumn[];
          const sum = new TableChecksum();
          const generatedAt = generated.find((g) => g.table === table);
          const generatedIndex = tableColumns.findIndex((c) => c.name === generatedAt?.column);
          let high = generatedHigh.get(table) ?? 0;
          // The store writes one page while the next is read and summed: PostgreSQL's COPY and this
          // process's work overlap (SQLite's writes are synchronous and gain nothing, lose nothing).
          let writing: Promise<void> | null = null;
          for await (const rows of pagesOf(from.db, table, tableColumns)) {
            for (const row of rows) {
              sum.add(row);
              if (generatedIndex >= 0) high = Math.max(high, Number(row[generatedIndex] ?? 0));
            }
            await writing;
            writing = storeCopyRepository.insertRows(trx, table, tableColumns, rows);
            // Its failure is met at the next await; until then it is not an unhandled rejection.
            writing.catch(() => {});
            options.onProgress?.(table, sum.rows, totals.get(table) ?? sum.rows);
          }
          await writing;
          if (generatedAt !== undefined)
            await storeCopyRepository.raiseGenerated(trx, table, generatedAt.column, high);
          const ms = performance.now() - tableStarted;
          options.onTableCopied?.(table, sum.rows, ms);
          reports.push({ table, rows: sum.rows, checksum: sum.hex, targetRows: 0, targetChecksum: '', ms });
        }
        await storeCopyRepository.restoreStructures(trx, setAside);
        // Statistics before the read-back: without them PostgreSQL reads each page of a million
        // rows by sorting the whole table rather than through its primary key.
        await into.store.refreshPlannerStatistics(trx, tables as (keyof Database)[]);
        const broken = await storeCopyRepository.foreignKeyViolations(trx);
        if (broken > 0)
          throw new Error(`${broken} copied rows reference rows that are not there: nothing was committed`);
        for (const report of reports) {
          const readBack = new TableChecksum();
          for await (const rows of pagesOf(trx, report.table, columns.get(report.table) as TableColumn[]))
            for (const row of rows) readBack.add(row);
          report.targetRows = readBack.rows;
          report.targetChecksum = readBack.hex;
        }
        if (!reports.every(tableMatches)) throw new CopyVerificationError(reports);
      }),
    );
    return {
      tables: reports,
      rows: reports.reduce((sum, report) => sum + report.rows, 0),
      ms: performance.now() - started,
    };
  } finally {
    await snapshot?.release();
    await target?.destroy();
    await source.destroy();
  }
}

export interface BackupResult {
  file: string;
  bytes: number;
  /** Rows per copied table, in the backup. */
  rows: Record<string, number>;
  ms: number;
}

/**
 * `safety-api backup`: the SQLite database `databaseUrl` as of one moment, into the new file `file`,
 * while servers and imports go on using it (`VACUUM INTO`: one read transaction). Written under a
 * temporary name beside `file` and renamed once checked, so a backup cut short is never mistaken
 * for one.
 */
export async function backupSqlite(databaseUrl: string, file: string): Promise<BackupResult> {
  const started = performance.now();
  const path = databaseFile(databaseUrl);
  if (path === null)
    throw new InputError(
      'backup is for SQLite: back PostgreSQL up with pg_dump and pg_restore (docs/operations.md, "Backups")',
    );
  if (isInMemory(databaseUrl) || !existsSync(path))
    throw new InputError(`DATABASE_URL: no database at ${path}`);
  if (existsSync(file)) throw new InputError(`${file} exists already: a backup never overwrites a file`);
  if (!existsSync(dirname(file))) throw new InputError(`${dirname(file)}: no such directory`);
  const partial = join(dirname(file), `.${basename(file)}.partial-${process.pid}`);
  const handle = openDatabase(databaseUrl);
  try {
    await storeCopyRepository.vacuumInto(handle.db, partial);
    const backup = handle.store.backup;
    if (backup === null) throw new Error('this store has no backup of its own');
    const snapshot = await backup.snapshotOfFile(partial);
    const rows: Record<string, number> = {};
    try {
      const problems = await storeCopyRepository.integrityProblems(snapshot.db);
      if (problems.length > 0) throw new Error(`the backup does not check out: ${problems[0]}`);
      const tables = await storeCopyRepository.tables(snapshot.db);
      for (const table of COPIED_TABLES)
        if (tables.includes(table)) rows[table] = await storeCopyRepository.count(snapshot.db, table);
    } finally {
      await snapshot.release();
    }
    renameSync(partial, file);
    return { file, bytes: statSync(file).size, rows, ms: performance.now() - started };
  } finally {
    rmSync(partial, { force: true });
    await handle.destroy();
  }
}

const SQLITE_HEADER = 'SQLite format 3\0';

/**
 * `safety-api restore`: a backup file (`backupSqlite`) into the store `databaseUrl` names, which
 * must be empty, of either kind. The backup is copied to a private file first, migrated there if an
 * older version wrote it, and copied from it as `copyStore` copies (the backup itself is never
 * changed).
 */
export async function restoreBackup(
  file: string,
  databaseUrl: string,
  copy: (options: Omit<CopyOptions, 'onProgress' | 'onTableCopied'>) => Promise<CopyResult>,
): Promise<CopyResult> {
  if (!existsSync(file)) throw new InputError(`--from: no file at ${file}`);
  const header = Buffer.alloc(16);
  const fd = openSync(file, 'r');
  try {
    readSync(fd, header, 0, 16, 0);
  } finally {
    closeSync(fd);
  }
  if (header.toString('latin1') !== SQLITE_HEADER)
    throw new InputError(`--from: ${file} is not a SQLite database (a backup made by "safety-api backup")`);
  const dir = mkdtempSync(join(tmpdir(), 'safety-api-restore-'));
  try {
    const working = join(dir, 'backup.db');
    copyFileSync(file, working);
    return await copy({ from: `sqlite:${working}`, to: databaseUrl, migrateSource: true });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The rows and checksum of every copied table of the store at `url`, as `copyStore` computes them
 * (for a check after the fact: that a refused or killed copy left a store as it was).
 */
export async function checksumTables(
  url: string,
): Promise<Record<string, { rows: number; checksum: string }>> {
  const handle = openDatabase(url);
  try {
    const tables = await storeCopyRepository.tables(handle.db);
    const sums: Record<string, { rows: number; checksum: string }> = {};
    for (const table of COPIED_TABLES) {
      if (!tables.includes(table)) continue;
      const sum = new TableChecksum();
      for await (const rows of pagesOf(handle.db, table, await storeCopyRepository.columns(handle.db, table)))
        for (const row of rows) sum.add(row);
      sums[table] = { rows: sum.rows, checksum: sum.hex };
    }
    return sums;
  } finally {
    await handle.destroy();
  }
}
