import {
  type CompiledQuery,
  type InsertQueryBuilder,
  type InsertResult,
  type Kysely,
  type RawBuilder,
  type Selectable,
  sql,
} from 'kysely';
import type { Database, IncidentsTable } from '../schema.ts';
import { storeFor } from '../store.ts';
import { anyColumnChanged, type ChangeStamp } from './change-stamp.ts';
import { repository } from '../store-context.ts';

/** An incident as the API shows it: every stored column but its account, paging and feed places. */
export type IncidentRow = Omit<
  Selectable<IncidentsTable>,
  'account_id' | 'position' | 'change_seq' | 'changed_at' | 'created_seq'
>;

/** An incident's place in paging order, which is (created_at, id) ascending. */
export type IncidentKey = Pick<Selectable<IncidentsTable>, 'created_at' | 'id'>;

/** `position` may be a guess: `rerank` settles positions after writes that could break them. */
export type IncidentInput = IncidentRow & { account_id: string; position?: number };

/**
 * Positions come in blocks of this many (block b holds positions b·B+1 … b·B+B). Writes keep every
 * block dense from its start except the blocks that deletions left holes in, which
 * `incident_blocks` lists with the rows they still hold; paging finds a rank's position from those
 * counts, and inside a listed block by a bounded index walk (docs/architecture.md).
 */
export const POSITION_BLOCK = 128;

/** An incident a deletion removed, and the position it held. */
export interface RemovedIncident {
  account_id: string;
  position: number;
}

/** A block of positions that deletions left holes in, and how many incidents it still holds. */
export interface HoleBlock {
  block: number;
  live: number;
}

/** The columns the APIs show (an `IncidentRow`). */
export const INCIDENT_COLUMNS = [
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

/** Every stored column but `position`. */
const INSERT_COLUMNS = [
  'account_id',
  ...INCIDENT_COLUMNS,
  'change_seq',
  'changed_at',
  'created_seq',
] as const;

/** Every stored column, in the order the batch statements bind them and `insertNew` copies them. */
export const BATCH_COLUMNS = [...INSERT_COLUMNS, 'position'] as const;

/** The columns an import may change; the others say where the row is. */
const UPDATED_COLUMNS = INCIDENT_COLUMNS.filter((column) => column !== 'id');

/**
 * The two batch statements of `upsertMany` (`IncidentBulk.runBatch`, built by each store):
 * - `insertNew` inserts the rows whose id is new and skips the others.
 * - `upsert` also updates rows whose id exists in the same account, never moving one to another.
 */
export type BatchStatement = 'insertNew' | 'upsert';

/** `insert` as the `upsert` batch statement: an existing row of the same account takes the new values. */
export function updatingExisting(
  insert: InsertQueryBuilder<Database, 'incidents', InsertResult>,
): InsertQueryBuilder<Database, 'incidents', InsertResult> {
  return insert.onConflict((oc) =>
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
        change_seq: eb.ref('excluded.change_seq'),
        changed_at: eb.ref('excluded.changed_at'),
      }))
      .whereRef('incidents.account_id', '=', 'excluded.account_id')
      .where(anyColumnChanged('incidents', UPDATED_COLUMNS)),
  );
}

/**
 * A field of the incident as the API shows it, as SQL: its column, or `severity_score`, computed
 * as `toIncident` computes it (NULL when either factor is).
 */
export function incidentFieldSql(field: string): RawBuilder<unknown> {
  if (field === 'severity_score') return sql`severity_likelihood * severity_impact`;
  if (!(INCIDENT_COLUMNS as readonly string[]).includes(field))
    throw new Error(`incidents have no field ${field}`);
  return sql.ref(field);
}

/** `insertNew` met an incident id that is already stored. */
export class IncidentExistsError extends Error {
  constructor() {
    super('an incident with one of these ids is already stored');
  }
}

/** What a deletion names: an incident of an account. */
type IncidentKeyRef = Pick<IncidentInput, 'id' | 'account_id'>;

/** The paging index, which a store may build again rather than move its entries one by one. */
export const POSITION_INDEX = 'incidents_account_position';

/** An incident's account and paging key, as an import reads it from its file. */
export type AccountIncidentKey = IncidentKey & { account_id: string };

/** An incident of the file, by its place among the file's incidents: its key and its rank in its account. */
export type RankedKey = AccountIncidentKey & { rank: number };

function keyRankingOf(db: Kysely<Database>) {
  const ranking = storeFor(db).incidents.keyRanking;
  if (ranking === null) throw new Error('this store re-ranks what it wrote: it ranks no keys first');
  return ranking;
}

export const incidentRepository = repository('incidentRepository', {
  /**
   * The `count` incidents at or below position `highest`, newest first: an index range read on
   * (account_id, position) whatever the depth of the page.
   */
  async listFromPosition(
    db: Kysely<Database>,
    accountId: string,
    highest: number,
    count: number,
  ): Promise<IncidentRow[]> {
    return db
      .selectFrom('incidents')
      .select(INCIDENT_COLUMNS)
      .where('account_id', '=', accountId)
      .where('position', '<=', highest)
      .orderBy('position', 'desc')
      .limit(count)
      .execute();
  },

  /** The blocks of the account that deletions left holes in, by block. */
  async listHoleBlocks(db: Kysely<Database>, accountId: string): Promise<HoleBlock[]> {
    return db
      .selectFrom('incident_blocks')
      .select(['block', 'live'])
      .where('account_id', '=', accountId)
      .orderBy('block')
      .execute();
  },

  /**
   * The position of the `nth` (from 1) incident of a block: an index walk of at most
   * POSITION_BLOCK entries.
   */
  async positionInBlock(
    db: Kysely<Database>,
    accountId: string,
    block: number,
    nth: number,
  ): Promise<number> {
    const row = await db
      .selectFrom('incidents')
      .select('position')
      .where('account_id', '=', accountId)
      .where('position', '>', block * POSITION_BLOCK)
      .orderBy('position')
      .limit(1)
      .offset(nth - 1)
      .executeTakeFirst();
    if (row === undefined) throw new Error(`incident block ${block} holds fewer than ${nth} incidents`);
    return row.position;
  },

  /**
   * Counts the incidents of each of `blocks` again after deletions or appends, listing the blocks
   * that now have holes and forgetting those that are full.
   */
  async recountBlocks(db: Kysely<Database>, accountId: string, blocks: Iterable<number>): Promise<void> {
    for (const block of blocks) {
      const { live } = await db
        .selectFrom('incidents')
        .select((eb) => eb.fn.countAll<number>().as('live'))
        .where('account_id', '=', accountId)
        .where('position', '>', block * POSITION_BLOCK)
        .where('position', '<=', (block + 1) * POSITION_BLOCK)
        .executeTakeFirstOrThrow();
      if (Number(live) === POSITION_BLOCK) {
        await db
          .deleteFrom('incident_blocks')
          .where('account_id', '=', accountId)
          .where('block', '=', block)
          .execute();
      } else {
        await db
          .insertInto('incident_blocks')
          .values({ account_id: accountId, block, live: Number(live) })
          .onConflict((oc) => oc.columns(['account_id', 'block']).doUpdateSet({ live: Number(live) }))
          .execute();
      }
    }
  },

  /**
   * Removes the incidents `refs` name (each already checked to belong to its account; ids that
   * are not there are skipped) and leaves a tombstone for each at its seq; returns the removed
   * incidents with the positions they held.
   */
  async deleteMany(db: Kysely<Database>, refs: (IncidentKeyRef & ChangeStamp)[]): Promise<RemovedIncident[]> {
    if (refs.length === 0) return [];
    const removed = await db
      .deleteFrom('incidents')
      .where(
        'id',
        'in',
        refs.map((r) => r.id),
      )
      .returning(['id', 'account_id', 'position'])
      .execute();
    if (removed.length === 0) return [];
    const gone = new Set(removed.map((r) => r.id));
    await db
      .insertInto('incident_tombstones')
      .values(
        refs
          .filter((r) => gone.has(r.id))
          .map((r) => ({
            id: r.id,
            account_id: r.account_id,
            change_seq: r.change_seq,
            changed_at: r.changed_at,
          })),
      )
      .onConflict((oc) =>
        oc.column('id').doUpdateSet((eb) => ({
          change_seq: eb.ref('excluded.change_seq'),
          changed_at: eb.ref('excluded.changed_at'),
        })),
      )
      .execute();
    return removed.map((r) => ({ account_id: r.account_id, position: r.position }));
  },

  /** Whether any deleted incident is still remembered, in any account. */
  async anyTombstone(db: Kysely<Database>): Promise<boolean> {
    return (
      (await db.selectFrom('incident_tombstones').select('id').limit(1).executeTakeFirst()) !== undefined
    );
  },

  /** Forgets the tombstones of incidents that are imported again. */
  async removeTombstones(db: Kysely<Database>, ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    await db.deleteFrom('incident_tombstones').where('id', 'in', ids).execute();
  },

  /**
   * Purges the account's tombstones of deletions before `before` (CHANGES_RETENTION_DAYS);
   * returns the largest seq purged, or 0.
   */
  async purgeTombstones(db: Kysely<Database>, accountId: string, before: string): Promise<number> {
    const purged = await db
      .deleteFrom('incident_tombstones')
      .where('account_id', '=', accountId)
      .where('changed_at', '<', before)
      .returning('change_seq')
      .execute();
    return purged.reduce((largest, row) => Math.max(largest, row.change_seq), 0);
  },

  async findById(db: Kysely<Database>, accountId: string, id: string): Promise<IncidentRow | undefined> {
    return db
      .selectFrom('incidents')
      .select(INCIDENT_COLUMNS)
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
  },

  /**
   * Inserts or updates by id and returns how many rows it wrote. An update keeps the row's
   * position (`rerank` settles positions) and never moves a row to another account: a record whose
   * id belongs to another account is left as it is and not counted, and neither is a record equal
   * to the stored row (which keeps its place in the feed), so a count below `incidents.length`
   * sends the importer to `existingOwners` to find out whether a record was refused.
   */
  async upsertMany(db: Kysely<Database>, incidents: (IncidentInput & ChangeStamp)[]): Promise<number> {
    if (incidents.length === 0) return 0;
    const bulk = storeFor(db).incidents;
    const parameters = bulk.batchParameters(incidents);
    // A bulk load is nearly all new incidents: the cheaper statement first, the upsert only for a
    // batch that holds some existing id (it writes the batch's new rows once more, unchanged).
    const inserted = await bulk.runBatch(db, 'insertNew', incidents.length, parameters);
    return inserted === incidents.length
      ? inserted
      : bulk.runBatch(db, 'upsert', incidents.length, parameters);
  },

  /**
   * Whether `insertNew` adds new incidents with less work than `upsertMany`: on PostgreSQL, where
   * `ON CONFLICT` looks every id up before inserting it (about a quarter of the work per row);
   * SQLite's INSERT OR IGNORE costs no more than an insert.
   */
  insertsNewFaster(db: Kysely<Database>): boolean {
    return storeFor(db).incidents.insertsNewFaster;
  },

  /**
   * Adds incidents whose ids are not stored (a file of new incidents, an account's first load): on
   * PostgreSQL with one `COPY … FROM STDIN`, every row checked by the table's constraints alone;
   * on SQLite with `upsertMany`'s first statement. Rejects with `IncidentExistsError` when any id
   * is already stored: the transaction must then be rolled back (PostgreSQL has aborted it
   * already, SQLite has added the other rows), and the caller starts again with `upsertMany`.
   */
  async insertNew(db: Kysely<Database>, incidents: (IncidentInput & ChangeStamp)[]): Promise<void> {
    if (incidents.length === 0) return;
    await storeFor(db).incidents.insertNew(db, incidents);
  },

  /**
   * The largest (created_at, id) of the account, the last in paging order, and its position;
   * null without incidents. Read at the last position: every write settles positions before it
   * commits.
   */
  async newest(
    db: Kysely<Database>,
    accountId: string,
  ): Promise<(IncidentKey & { position: number }) | null> {
    const row = await db
      .selectFrom('incidents')
      .select(['created_at', 'id', 'position'])
      .where('account_id', '=', accountId)
      .orderBy('position', 'desc')
      .limit(1)
      .executeTakeFirst();
    return row ?? null;
  },

  /**
   * Drops the paging index before up to `rows` incidents are inserted against its order (a file
   * newest first: each insert lands on the index's first page, which splits again and again), when
   * that is cheaper than inserting their entries (`IncidentBulk.positionIndexToRebuild`). Returns the statement
   * that builds it again (`buildPositionIndex`), to run before the positions are read; null when
   * the index stays.
   */
  async dropPositionIndexBefore(db: Kysely<Database>, rows: number): Promise<string | null> {
    const rebuild = await storeFor(db).incidents.positionIndexToRebuild(db, rows);
    if (rebuild !== null) await sql`DROP INDEX ${sql.id(POSITION_INDEX)}`.execute(db);
    return rebuild;
  },

  async buildPositionIndex(db: Kysely<Database>, statement: string): Promise<void> {
    await sql.raw(statement).execute(db);
  },

  /**
   * Whether an import ranks a file out of order before writing it (`rankKeys`) rather than
   * re-ranking what it wrote (`rerank`): on PostgreSQL, where re-ranking writes a new version of
   * every row it moves, with an entry in each index (docs/performance.md, "Import order"). On
   * SQLite, re-ranking rewrites pages in place and was faster, and the sorts of ranking first grew
   * the process past its memory bound.
   */
  ranksBeforeWriting(db: Kysely<Database>): boolean {
    return storeFor(db).incidents.keyRanking !== null;
  },

  /**
   * Ranks an import's incidents before it writes them (PostgreSQL: `ranksBeforeWriting`). `keys`
   * are the keys of the file's incident records in file order; each is ranked in its account by
   * (created_at, id), as paging orders them, by PostgreSQL (a temporary table, filled with COPY,
   * and a cursor over it), so that a file of any size is sorted outside the process's memory.
   * Returns the number of keys, read back in file order with their ranks by `rankedKeys`; the
   * cursor and table last until `dropRankedKeys` or the end of the transaction.
   */
  async rankKeys(db: Kysely<Database>, keys: AsyncIterable<AccountIncidentKey[]>): Promise<number> {
    return keyRankingOf(db).rank(db, keys);
  },

  /** The next `count` ranked keys (`rankKeys`), in file order. */
  async rankedKeys(db: Kysely<Database>, count: number): Promise<RankedKey[]> {
    return keyRankingOf(db).next(db, count);
  },

  /** Drops what `rankKeys` made, at the end of the import that read it. */
  async dropRankedKeys(db: Kysely<Database>): Promise<void> {
    await keyRankingOf(db).drop(db);
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
   * (created_at, id) that changed when a change only inserted rows into an account without holes:
   * every earlier incident keeps its rank, so appending new incidents renumbers only the new ones.
   * A whole re-rank (`from` null) fills every hole. Run by an import, with its bulk settings
   * (`Store.withBulkWriteSettings`): a file newest first or shuffled re-ranks every incident it brought.
   *
   * How the rows are moved is the store's (`IncidentBulk.rerank`).
   */
  async rerank(db: Kysely<Database>, accountId: string, from: IncidentKey | null): Promise<void> {
    if (from === null) await db.deleteFrom('incident_blocks').where('account_id', '=', accountId).execute();
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
    await storeFor(db).incidents.rerank(db, accountId, offset, range);
  },

  /**
   * The account's incidents in the list's order (position descending), with `fields` as columns in
   * that order (`incidentFieldSql`). The statement an export of a PostgreSQL snapshot copies out
   * (`Snapshot.copyOut`).
   */
  copyQuery(db: Kysely<Database>, accountId: string, fields: readonly string[]): CompiledQuery {
    return db
      .selectFrom('incidents')
      .select(fields.map((field) => incidentFieldSql(field).as(field)))
      .where('account_id', '=', accountId)
      .orderBy('position', 'desc')
      .compile();
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
      .select([...INCIDENT_COLUMNS, 'position'])
      .where('account_id', '=', accountId);
    if (below !== null) query = query.where('position', '<', below);
    return query.orderBy('position', 'desc').limit(limit).execute();
  },
});
