import { CompiledQuery, type Kysely, type RawBuilder, sql } from 'kysely';
import type { ChangeStamp } from '../repositories/change-stamp.ts';
import {
  BATCH_COLUMNS,
  type BatchStatement,
  IncidentExistsError,
  type IncidentInput,
  POSITION_INDEX,
  updatingExisting,
} from '../repositories/incidents.ts';
import type { Database } from '../schema.ts';
import type { IncidentBulk } from '../store.ts';

/** SQLite's page cache while `rerank` runs (KiB). */
const RERANK_CACHE_KIB = 2048;

/**
 * How SQLite writes many incidents. Building a many-row INSERT through Kysely costs more than
 * SQLite takes to run it, and its SQL depends only on the statement and the row count: the last
 * one built is kept per statement, so the full batches of an import build each once and reuse its
 * prepared statement too. New incidents go in with `INSERT OR IGNORE`: a statement that cannot fail
 * halfway, which SQLite runs without journaling the pages it changes (see `withBulkWriteSettings`).
 */
export class SqliteIncidentBulk implements IncidentBulk {
  /** SQLite's INSERT OR IGNORE costs no more than an insert. */
  readonly insertsNewFaster = false;
  /** Re-ranking rewrites pages in place and was faster; the sorts of ranking first grew the process past its memory bound. */
  readonly keyRanking = null;
  private readonly built: Partial<Record<BatchStatement, { rows: number; sql: string }>> = {};

  batchParameters(incidents: (IncidentInput & ChangeStamp)[]): unknown[] {
    const parameters: unknown[] = [];
    for (const incident of incidents) {
      for (const column of BATCH_COLUMNS) {
        // 0 is the position column's default: the value an insert without a position stored before rerank.
        parameters.push(column === 'position' ? (incident.position ?? 0) : (incident[column] ?? null));
      }
    }
    return parameters;
  }

  async runBatch(
    db: Kysely<Database>,
    statement: BatchStatement,
    rows: number,
    parameters: unknown[],
  ): Promise<number> {
    const result = await db.executeQuery(CompiledQuery.raw(this.batchSql(db, statement, rows), parameters));
    return Number(result.numAffectedRows ?? 0);
  }

  private batchSql(db: Kysely<Database>, statement: BatchStatement, rows: number): string {
    const cached = this.built[statement];
    if (cached !== undefined && cached.rows === rows) return cached.sql;
    // Each column's value is its place in the row, so the parameters show the order Kysely binds.
    const row = Object.fromEntries(BATCH_COLUMNS.map((column, index) => [column, index]));
    const insert = db
      .insertInto('incidents')
      .values(Array.from({ length: rows }, () => row as unknown as IncidentInput & ChangeStamp));
    const query = (statement === 'upsert' ? updatingExisting(insert) : insert.orIgnore()).compile();
    const bound = Array.from(
      { length: rows * BATCH_COLUMNS.length },
      (_, index) => index % BATCH_COLUMNS.length,
    );
    if (
      query.parameters.length !== bound.length ||
      query.parameters.some((value, index) => value !== bound[index])
    )
      throw new Error('incident batch insert: Kysely bound the columns in an unexpected order');
    this.built[statement] = { rows, sql: query.sql };
    return query.sql;
  }

  async insertNew(db: Kysely<Database>, incidents: (IncidentInput & ChangeStamp)[]): Promise<void> {
    const inserted = await this.runBatch(db, 'insertNew', incidents.length, this.batchParameters(incidents));
    if (inserted < incidents.length) throw new IncidentExistsError();
  }

  /**
   * The statement that made the paging index, when it is to be dropped and built again rather than
   * have `rows` entries moved or inserted out of its order (inside a transaction, so that it is
   * never left dropped by a failure in between): when they are over a quarter of the table.
   * Building it sorts every incident's entry once (2.8 s for a million, against 17 s to move the
   * entries of a shuffled million one at a time into an index larger than the page cache).
   */
  async positionIndexToRebuild(db: Kysely<Database>, rows: number): Promise<string | null> {
    if (!db.isTransaction) return null;
    const { total } = await db
      .selectFrom('incidents')
      .select((eb) => eb.fn.countAll<number>().as('total'))
      .executeTakeFirstOrThrow();
    if (rows * 4 <= Number(total)) return null;
    const index = await sql<{ sql: string }>`
      SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ${POSITION_INDEX}`.execute(db);
    return index.rows[0]?.sql ?? null;
  }

  /**
   * The rows are visited in the table's own order (rowid), each page rewritten once, with no
   * lookup by id; only the keys are sorted, in temporary files. `OR IGNORE`: no constraint can
   * fail, and a statement that cannot fail halfway needs no statement journal, which would hold the
   * original of every page it changes. When most of the table is re-ranked, the (account_id,
   * position) index is built again after the update instead of moving each entry: for a shuffled
   * million, moving them was two thirds of the update's time.
   */
  async rerank(
    db: Kysely<Database>,
    accountId: string,
    offset: number,
    range: RawBuilder<unknown>,
  ): Promise<void> {
    // The rows from `offset` on are re-ranked.
    const { n } = await db
      .selectFrom('incidents')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('account_id', '=', accountId)
      .executeTakeFirstOrThrow();
    const rebuild = await this.positionIndexToRebuild(db, Number(n) - offset);
    const cache = Object.values((await sql`PRAGMA cache_size`.execute(db)).rows[0] as object)[0] as number;
    // SQLite sizes a sort's share of memory by the page cache: with the import's 16 MiB, this
    // update added 80 MB to the process, with 2 MiB 36 MB, and took no longer (it reads and
    // writes each page once).
    await sql.raw(`PRAGMA cache_size = -${RERANK_CACHE_KIB}`).execute(db);
    try {
      if (rebuild !== null) await sql`DROP INDEX ${sql.id(POSITION_INDEX)}`.execute(db);
      await sql`
        UPDATE OR IGNORE incidents SET position = ranked.rn
        FROM (
          SELECT rowid AS row, ${offset} + row_number() OVER (ORDER BY created_at, id) AS rn
          FROM incidents WHERE account_id = ${accountId} ${range}
          ORDER BY rowid
        ) AS ranked
        WHERE incidents.rowid = ranked.row AND incidents.position <> ranked.rn`.execute(db);
      if (rebuild !== null) await sql.raw(rebuild).execute(db);
    } finally {
      await sql.raw(`PRAGMA cache_size = ${Number(cache)}`).execute(db);
    }
  }
}
