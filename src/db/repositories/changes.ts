import type { Compilable, ExpressionBuilder, Kysely, Selectable } from 'kysely';
import type { Database, IncidentsTable, IncidentTombstonesTable } from '../schema.ts';
import { storeFor } from '../store.ts';
import {
  isPublicNamedResource,
  type NamedResourceRow,
  type NamedResourceTable,
  PUBLIC_NAMED_RESOURCE_COLUMNS,
} from './named-resources.ts';
import { INCIDENT_COLUMNS, type IncidentRow, incidentFieldSql } from './incidents.ts';
import { isPublicUser, PUBLIC_USER_COLUMNS, type UserRow } from './users.ts';
import { repository } from '../store-context.ts';

/**
 * The changes feed's reads (docs/architecture.md, "Changes and deletions"). Each public record
 * row carries the seq of its latest change, so the changes of an account in a seq range are one
 * range read on the (account_id, change_seq) index of each table that holds them: no sort, no
 * count, no offset, whatever the table's size.
 */

/** The seqs a read covers: after `after`, up to and including `upTo`, the first `limit` of them. */
export interface SeqRange {
  after: number;
  upTo: number;
  limit: number;
}

/** Where the account's feed stands: its head (the last seq given out) and the last seq purged. */
export interface FeedState {
  head: number;
  purgedSeq: number;
}

/** Where a record's latest change sits in the feed. */
type ChangePlace = Pick<Selectable<IncidentsTable>, 'change_seq' | 'changed_at'>;

/** `visible`: 1 when the public view shows the record, 0 when the feed reports it deleted. */
export type UserChangeRow = UserRow & ChangePlace & { visible: number };
export type NamedResourceChangeRow = NamedResourceRow & ChangePlace & { visible: number };
export type IncidentTombstoneRow = Omit<Selectable<IncidentTombstonesTable>, 'account_id'>;

type FeedTable = 'incidents' | 'incident_tombstones' | 'users' | NamedResourceTable;

function inRange(accountId: string, { after, upTo }: SeqRange) {
  return (eb: ExpressionBuilder<Database, FeedTable>) =>
    eb.and([eb('account_id', '=', accountId), eb('change_seq', '>', after), eb('change_seq', '<=', upTo)]);
}

/**
 * Runs a feed read as a statement the store prepares once per connection (`Store.prepared`): a
 * page runs these on every request, and their text depends only on the code.
 */
async function prepared<Row>(query: Compilable<Row>, db: Kysely<Database>): Promise<Row[]> {
  return (await db.executeQuery(storeFor(db).prepared(query.compile()))).rows;
}

/** The tables whose rows enter and leave the public view. */
export type RecordTable = 'incidents' | 'users' | NamedResourceTable;

export const changeRepository = repository('changeRepository', {
  async feedState(db: Kysely<Database>, accountId: string): Promise<FeedState | undefined> {
    const [row] = await prepared(
      db.selectFrom('accounts').select(['data_version', 'changes_purged_seq']).where('id', '=', accountId),
      db,
    );
    return row === undefined ? undefined : { head: row.data_version, purgedSeq: row.changes_purged_seq };
  },

  /**
   * The incidents of `incidents` below as COPY text (PostgreSQL: `Store.copyRows`), for a reader
   * that writes their JSON without a row object: per row `change_seq`, `id`, the incident's
   * `fields` in order (`incidentFieldSql`) and `changed_at`. Null where the store has no COPY.
   */
  async incidentsCopied(
    db: Kysely<Database>,
    accountId: string,
    range: SeqRange,
    fields: readonly string[],
  ): Promise<Buffer | null> {
    const copyRows = storeFor(db).copyRows;
    if (copyRows === null) return null;
    const query = db
      .selectFrom('incidents')
      .select([
        'change_seq',
        'id',
        ...fields.map((field, i) => incidentFieldSql(field).as(`f${i}`)),
        'changed_at',
      ])
      .where(inRange(accountId, range))
      .orderBy('change_seq')
      .limit(range.limit)
      .compile();
    return copyRows(db, query);
  },

  /** The columns the lists show, and the change's place. */
  async incidents(
    db: Kysely<Database>,
    accountId: string,
    range: SeqRange,
  ): Promise<(IncidentRow & Pick<Selectable<IncidentsTable>, 'change_seq' | 'changed_at'>)[]> {
    return prepared(
      db
        .selectFrom('incidents')
        .select([...INCIDENT_COLUMNS, 'change_seq', 'changed_at'])
        .where(inRange(accountId, range))
        .orderBy('change_seq')
        .limit(range.limit),
      db,
    );
  },

  async incidentTombstones(
    db: Kysely<Database>,
    accountId: string,
    range: SeqRange,
  ): Promise<IncidentTombstoneRow[]> {
    return prepared(
      db
        .selectFrom('incident_tombstones')
        .select(['id', 'change_seq', 'changed_at'])
        .where(inRange(accountId, range))
        .orderBy('change_seq')
        .limit(range.limit),
      db,
    );
  },

  async users(db: Kysely<Database>, accountId: string, range: SeqRange): Promise<UserChangeRow[]> {
    return prepared(
      db
        .selectFrom('users')
        .select([...PUBLIC_USER_COLUMNS, 'change_seq', 'changed_at'])
        .select((eb) => eb.case().when(isPublicUser(eb)).then(1).else(0).end().as('visible'))
        .where(inRange(accountId, range))
        .orderBy('change_seq')
        .limit(range.limit),
      db,
    );
  },

  async namedResources(
    db: Kysely<Database>,
    table: NamedResourceTable,
    accountId: string,
    range: SeqRange,
  ): Promise<NamedResourceChangeRow[]> {
    return prepared(
      db
        .selectFrom(table)
        .select([...PUBLIC_NAMED_RESOURCE_COLUMNS, 'change_seq', 'changed_at'])
        .select((eb) => eb.case().when(isPublicNamedResource(eb)).then(1).else(0).end().as('visible'))
        .where(inRange(accountId, range))
        .orderBy('change_seq')
        .limit(range.limit),
      db,
    );
  },

  /** `created_seq` of the account's rows among `ids` (those still there): when each entered the view. */
  async createdSeqs(
    db: Kysely<Database>,
    table: RecordTable,
    accountId: string,
    ids: string[],
  ): Promise<Map<string, number>> {
    if (ids.length === 0) return new Map();
    // By primary key alone, the account checked here: with `account_id` in the WHERE, SQLite
    // (no planner statistics) walks the account's whole index instead of looking the ids up.
    const rows = await db
      .selectFrom(table)
      .select(['id', 'account_id', 'created_seq'])
      .where('id', 'in', ids)
      .execute();
    return new Map(
      rows.filter((row) => row.account_id === accountId).map((row) => [row.id, row.created_seq]),
    );
  },
});
