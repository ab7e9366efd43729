import { CompiledQuery, type Kysely, type RawBuilder, sql } from 'kysely';
import pg from 'pg';
import { copyText } from '../copy-text.ts';
import type { ChangeStamp } from '../repositories/change-stamp.ts';
import {
  type AccountIncidentKey,
  BATCH_COLUMNS,
  type BatchStatement,
  IncidentExistsError,
  type IncidentInput,
  type RankedKey,
  updatingExisting,
} from '../repositories/incidents.ts';
import type { Database } from '../schema.ts';
import type { IncidentBulk, KeyRanking } from '../store.ts';
import type { CopiedIn } from './client.ts';

/** The type of each column of a batch's rows, as `json_to_recordset` reads them. */
const POSTGRES_TYPES: Record<(typeof BATCH_COLUMNS)[number], 'text' | 'integer'> = {
  account_id: 'text',
  id: 'text',
  incident_number: 'text',
  description: 'text',
  status: 'text',
  severity_likelihood: 'integer',
  severity_impact: 'integer',
  location: 'text',
  incident_date: 'text',
  created_at: 'text',
  updated_at: 'text',
  change_seq: 'integer',
  changed_at: 'text',
  created_seq: 'integer',
  position: 'integer',
};

/** A file's incident keys in file order (`ord` from 1), while an import ranks them (`rank`). */
const KEYS_TABLE = 'import_incident_keys';
/** Each of those keys with its rank in its account, in file order (`rank`). */
const RANKS_CURSOR = 'import_incident_ranks';

type CopyIn = (table: string, columns: readonly string[], data: string) => CompiledQuery<CopiedIn>;

/**
 * How PostgreSQL writes many incidents. A batch is one parameter whatever its size, a JSON array
 * of the rows that `json_to_recordset` turns into a table: one set-based statement per batch,
 * instead of binding (and PostgreSQL parsing) fifteen parameters per row. Its SQL does not depend
 * on the batch size, so each statement is built once. New incidents are copied in (`COPY … FROM
 * STDIN`), and a file out of order is ranked before it is written (`keyRanking`).
 */
export class PostgresIncidentBulk implements IncidentBulk {
  readonly insertsNewFaster = true;
  readonly keyRanking: KeyRanking;
  private readonly built: Partial<Record<BatchStatement, string>> = {};
  private readonly copyIn: CopyIn;

  /** `copyIn`: the store's `COPY … FROM STDIN` (`PostgresStore.copyInQuery`). */
  constructor(copyIn: CopyIn) {
    this.copyIn = copyIn;
    this.keyRanking = keyRanking(copyIn);
  }

  batchParameters(incidents: (IncidentInput & ChangeStamp)[]): unknown[] {
    // Keys JSON leaves out (undefined) are NULL to json_to_recordset; keys it does not name, ignored.
    return [JSON.stringify(incidents)];
  }

  async runBatch(
    db: Kysely<Database>,
    statement: BatchStatement,
    _rows: number,
    parameters: unknown[],
  ): Promise<number> {
    const result = await db.executeQuery(CompiledQuery.raw(this.batchSql(db, statement), parameters));
    return Number(result.numAffectedRows ?? 0);
  }

  private batchSql(db: Kysely<Database>, statement: BatchStatement): string {
    const cached = this.built[statement];
    if (cached !== undefined) return cached;
    const insert = db
      .insertInto('incidents')
      .columns(BATCH_COLUMNS)
      .expression(
        // A record without a position stores 0, the column's default.
        sql`SELECT ${sql.join(BATCH_COLUMNS.map((column) => (column === 'position' ? sql`coalesce(position, 0)` : sql.ref(column))))} FROM json_to_recordset(${0}::json) AS r(${sql.raw(
          BATCH_COLUMNS.map((column) => `${column} ${POSTGRES_TYPES[column]}`).join(', '),
        )})`,
      );
    const query = (
      statement === 'upsert'
        ? updatingExisting(insert)
        : insert.onConflict((oc) => oc.column('id').doNothing())
    ).compile();
    if (query.parameters.length !== 1 || query.parameters[0] !== 0)
      throw new Error('incident batch insert: Kysely bound the columns in an unexpected order');
    this.built[statement] = query.sql;
    return query.sql;
  }

  async insertNew(db: Kysely<Database>, incidents: (IncidentInput & ChangeStamp)[]): Promise<void> {
    // A record without a position stores 0, the column's default.
    for (const incident of incidents) incident.position ??= 0;
    try {
      await db.executeQuery(this.copyIn('incidents', BATCH_COLUMNS, copyText(incidents, BATCH_COLUMNS)));
    } catch (error) {
      if (
        error instanceof pg.DatabaseError &&
        error.code === '23505' &&
        error.constraint === 'incidents_pkey'
      )
        throw new IncidentExistsError();
      throw error;
    }
  }

  /** PostgreSQL keeps the paging index: dropping it would lock readers out. */
  async positionIndexToRebuild(): Promise<string | null> {
    return null;
  }

  async rerank(
    db: Kysely<Database>,
    accountId: string,
    offset: number,
    range: RawBuilder<unknown>,
  ): Promise<void> {
    await sql`
      UPDATE incidents SET position = ranked.rn
      FROM (
        SELECT id, ${offset} + row_number() OVER (ORDER BY created_at, id) AS rn
        FROM incidents WHERE account_id = ${accountId} ${range}
      ) AS ranked
      WHERE incidents.id = ranked.id AND incidents.position <> ranked.rn`.execute(db);
  }
}

/**
 * An import's keys ranked by PostgreSQL: a temporary table, filled with COPY, and a cursor over it,
 * so that a file of any size is sorted outside the process's memory. Re-ranking there writes a new
 * version of every row it moves, with an entry in each index (docs/performance.md, "Import order").
 */
function keyRanking(copyIn: CopyIn): KeyRanking {
  return {
    async rank(db: Kysely<Database>, keys: AsyncIterable<AccountIncidentKey[]>): Promise<number> {
      await sql`CREATE TEMPORARY TABLE ${sql.id(KEYS_TABLE)} (
        ord integer NOT NULL, account_id text NOT NULL, created_at text NOT NULL, id text NOT NULL
      ) ON COMMIT DROP`.execute(db);
      const columns = ['ord', 'account_id', 'created_at', 'id'] as const;
      let added = 0;
      for await (const chunk of keys) {
        if (chunk.length === 0) continue;
        const rows = chunk.map((key) => ({ ...key, ord: (added += 1) }));
        await db.executeQuery(copyIn(KEYS_TABLE, columns, copyText(rows, columns)));
      }
      // Both sorts run at the first FETCH, in PostgreSQL's work memory or its temporary files.
      await sql`DECLARE ${sql.id(RANKS_CURSOR)} NO SCROLL CURSOR FOR
        SELECT row_number() OVER (PARTITION BY account_id ORDER BY created_at, id) AS rank, account_id, created_at, id
        FROM ${sql.id(KEYS_TABLE)} ORDER BY ord`.execute(db);
      return added;
    },

    async next(db: Kysely<Database>, count: number): Promise<RankedKey[]> {
      const ranked =
        await sql<RankedKey>`FETCH FORWARD ${sql.lit(count)} FROM ${sql.id(RANKS_CURSOR)}`.execute(db);
      // row_number() is a bigint, which pg reads as a string.
      return ranked.rows.map((row) => ({ ...row, rank: Number(row.rank) }));
    },

    async drop(db: Kysely<Database>): Promise<void> {
      await sql`CLOSE ${sql.id(RANKS_CURSOR)}`.execute(db);
      await sql`DROP TABLE ${sql.id(KEYS_TABLE)}`.execute(db);
    },
  };
}
