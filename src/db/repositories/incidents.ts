import { CompiledQuery, type Kysely, type Selectable, SqliteAdapter, sql } from 'kysely';
import type { Database, IncidentsTable } from '../schema.ts';

/** An incident as the API shows it: every stored column but its account, paging and feed places. */
export type IncidentRow = Omit<
  Selectable<IncidentsTable>,
  'account_id' | 'position' | 'change_seq' | 'changed_at'
>;

/** An incident's place in paging order, which is (created_at, id) ascending. */
export type IncidentKey = Pick<Selectable<IncidentsTable>, 'created_at' | 'id'>;

/** `position` may be a guess: `rerank` settles positions after writes that could break them. */
export type IncidentInput = IncidentRow & { account_id: string; position?: number };

const COLUMNS = [
  'id',
  'incident_number',
  'description',
  'status',
  'severity_likelihood',
  'severity_impact',
  'location',
  'incident_date',
  'created_at',
  'updated_at',
] as const;

/** Every stored column but `position`, in the order `batchSql` binds them. */
const INSERT_COLUMNS = ['account_id', ...COLUMNS] as const;

/**
 * The two statements of `upsertMany`, for a batch of `rows` rows:
 * - `insertNew` inserts the rows whose id is new and skips the others. On SQLite it is
 *   `INSERT OR IGNORE`: a statement that cannot fail halfway, which SQLite runs without journaling
 *   the pages it changes (see `withBulkWriteSettings`); on PostgreSQL `ON CONFLICT DO NOTHING`.
 * - `upsert` also updates rows whose id exists in the same account, never moving one to another.
 */
type BatchStatement = 'insertNew' | 'upsert';

/**
 * Building a many-row INSERT through Kysely costs more than SQLite takes to run it, and its SQL
 * depends only on the store, the statement and the row count. The last one compiled is kept per
 * store (adapter) and statement, so the full batches of an import build each once and reuse its
 * prepared statement too.
 */
const compiled = new WeakMap<object, Partial<Record<BatchStatement, { rows: number; sql: string }>>>();

function batchSql(db: Kysely<Database>, statement: BatchStatement, rows: number): string {
  const adapter = db.getExecutor().adapter;
  const cache = compiled.get(adapter) ?? {};
  compiled.set(adapter, cache);
  const cached = cache[statement];
  if (cached !== undefined && cached.rows === rows) return cached.sql;
  // Each column's value is its place in the row, so the parameters show the order Kysely binds.
  const order = [...INSERT_COLUMNS, 'position'];
  const row = Object.fromEntries(order.map((column, index) => [column, index]));
  const insert = db
    .insertInto('incidents')
    .values(Array.from({ length: rows }, () => row as unknown as IncidentInput));
  const query = (
    statement === 'upsert'
      ? insert.onConflict((oc) =>
          oc
            .column('id')
            .doUpdateSet((eb) => ({
              incident_number: eb.ref('excluded.incident_number'),
              description: eb.ref('excluded.description'),
              status: eb.ref('excluded.status'),
              severity_likelihood: eb.ref('excluded.severity_likelihood'),
              severity_impact: eb.ref('excluded.severity_impact'),
              location: eb.ref('excluded.location'),
              incident_date: eb.ref('excluded.incident_date'),
              created_at: eb.ref('excluded.created_at'),
              updated_at: eb.ref('excluded.updated_at'),
            }))
            .whereRef('incidents.account_id', '=', 'excluded.account_id'),
        )
      : adapter instanceof SqliteAdapter
        ? insert.orIgnore()
        : insert.onConflict((oc) => oc.column('id').doNothing())
  ).compile();
  if (
    query.parameters.length !== rows * order.length ||
    query.parameters.some((value, index) => value !== index % order.length)
  )
    throw new Error('incident batch insert: Kysely bound the columns in an unexpected order');
  cache[statement] = { rows, sql: query.sql };
  return query.sql;
}

export const incidentRepository = {
  /**
   * Incidents whose position lies in [lowest, highest], newest first. Positions are dense ranks
   * (see schema.ts), so this is an index range read whatever the depth of the page.
   */
  async listByPositionRange(
    db: Kysely<Database>,
    accountId: string,
    lowest: number,
    highest: number,
  ): Promise<IncidentRow[]> {
    return db
      .selectFrom('incidents')
      .select(COLUMNS)
      .where('account_id', '=', accountId)
      .where('position', '>=', lowest)
      .where('position', '<=', highest)
      .orderBy('position', 'desc')
      .execute();
  },

  async findById(db: Kysely<Database>, accountId: string, id: string): Promise<IncidentRow | undefined> {
    return db
      .selectFrom('incidents')
      .select(COLUMNS)
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
  },

  /**
   * Inserts or updates by id and returns how many rows it wrote. An update keeps the row's
   * position (`rerank` settles positions) and never moves a row to another account: a record whose
   * id belongs to another account is left as it is and not counted, so a count below
   * `incidents.length` means that `existingOwners` will name the refused records.
   */
  async upsertMany(db: Kysely<Database>, incidents: IncidentInput[]): Promise<number> {
    if (incidents.length === 0) return 0;
    const parameters: unknown[] = [];
    for (const incident of incidents) {
      for (const column of INSERT_COLUMNS) parameters.push(incident[column] ?? null);
      // 0 is the column's default: the value an insert without a position stored before rerank.
      parameters.push(incident.position ?? 0);
    }
    const run = async (statement: BatchStatement) => {
      const sql = batchSql(db, statement, incidents.length);
      return Number((await db.executeQuery(CompiledQuery.raw(sql, parameters))).numAffectedRows ?? 0);
    };
    // A bulk load is nearly all new incidents: the cheaper statement first, the upsert only for a
    // batch that holds some existing id (it writes the batch's new rows once more, unchanged).
    const inserted = await run('insertNew');
    return inserted === incidents.length ? inserted : run('upsert');
  },

  /**
   * The largest (created_at, id) of the account, the last in paging order; null without incidents.
   * Read at the last position: every write settles positions before it commits.
   */
  async newestKey(db: Kysely<Database>, accountId: string): Promise<IncidentKey | null> {
    const row = await db
      .selectFrom('incidents')
      .select(['created_at', 'id'])
      .where('account_id', '=', accountId)
      .orderBy('position', 'desc')
      .limit(1)
      .executeTakeFirst();
    return row ?? null;
  },

  async countForAccount(db: Kysely<Database>, accountId: string): Promise<number> {
    const row = await db
      .selectFrom('incidents')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('account_id', '=', accountId)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  },

  /**
   * Re-derives the dense positions of an account's incidents. `from` is the smallest
   * (created_at, id) that changed when a change only inserted rows: every earlier incident keeps
   * its rank, so appending new incidents renumbers only the new ones.
   */
  async rerank(db: Kysely<Database>, accountId: string, from: IncidentKey | null): Promise<void> {
    let offset = 0;
    let range = sql``;
    if (from !== null) {
      const before = await db
        .selectFrom('incidents')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('account_id', '=', accountId)
        .where(sql<boolean>`(created_at, id) < (${from.created_at}, ${from.id})`)
        .executeTakeFirstOrThrow();
      offset = Number(before.n);
      range = sql`AND (created_at, id) >= (${from.created_at}, ${from.id})`;
    }
    await sql`
      UPDATE incidents SET position = ranked.rn
      FROM (
        SELECT id, ${offset} + row_number() OVER (ORDER BY created_at, id) AS rn
        FROM incidents WHERE account_id = ${accountId} ${range}
      ) AS ranked
      WHERE incidents.id = ranked.id AND incidents.position <> ranked.rn`.execute(db);
  },

  /**
   * Up to `limit` incidents below position `below` (from the newest when null), newest first, with
   * their positions: the list walked in keyset chunks, each an index range read.
   */
  async listBelowPosition(
    db: Kysely<Database>,
    accountId: string,
    below: number | null,
    limit: number,
  ): Promise<(IncidentRow & { position: number })[]> {
    let query = db
      .selectFrom('incidents')
      .select([...COLUMNS, 'position'])
      .where('account_id', '=', accountId);
    if (below !== null) query = query.where('position', '<', below);
    return query.orderBy('position', 'desc').limit(limit).execute();
  },
};
