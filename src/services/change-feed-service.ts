import type { Kysely } from 'kysely';
import {
  changeRepository,
  type FeedState,
  type RecordTable,
  type SeqRange,
} from '../db/repositories/changes.ts';
import type { NamedResourceTable } from '../db/repositories/named-resources.ts';
import type { Database } from '../db/schema.ts';
import { inSpan } from '../telemetry/tracing.ts';
import { ApiError } from '../errors.ts';
import { type Change, toIncident } from '../schemas/public.ts';
import { INCIDENT_FIELDS } from '../schemas/json-fields.ts';
import { CopyToNdjson, type CopyColumn, objectColumns } from '../db/copy-ndjson.ts';
import { type ChangeCursors, changeCursorsOf } from './change-cursor.ts';
import { NAMED_RESOURCE_TABLES } from './directory-service.ts';

/**
 * The changes feed (docs/design.md, "Changes feed"; docs/architecture.md, "Changes and deletions").
 *
 * Every record row holds the seq of its latest change, so the feed is compacted by construction:
 * reading the rows whose seq lies in a range gives each changed record once, in its latest state.
 * A walk goes in passes: a pass delivers the seqs in (position, bound], where `bound` is the head
 * when the pass began. A record changed during the pass gets a seq above the bound: its old seq
 * leaves the range (so it is not delivered twice in the pass) and it comes in the next pass, which
 * begins when the position reaches the bound, with the head of that moment as its bound.
 */

/** The `cursor` value that asks for no changes, only a cursor at the current head. */
export const LATEST_CURSOR = 'latest';

const SECONDS_PER_DAY = 86_400;

export interface FeedRequest {
  /** As the client sent it: none (from the start), `latest`, or a cursor this feed issued. */
  cursor: string | undefined;
  /** Changes per page, already normalized. */
  limit: number;
  /** CHANGES_RETENTION_DAYS: how long the feed keeps deletions, and a cursor stays valid. */
  retentionDays: number;
}

const TYPE_OF: Record<NamedResourceTable, 'department' | 'location'> = {
  departments: 'department',
  locations: 'location',
};

/** One table's changes in a seq range, ordered by seq, rendered as the list endpoints render them. */
type ChangeSource = (db: Kysely<Database>, accountId: string, range: SeqRange) => Promise<Change[]>;

const INCIDENTS: ChangeSource = async (db, accountId, range) =>
  (await changeRepository.incidents(db, accountId, range)).map((row) => ({
    seq: row.change_seq,
    type: 'incident',
    op: 'upsert',
    id: row.id,
    object: toIncident(row),
    changed_at: row.changed_at,
  }));

/** Every table but incidents (`INCIDENTS`), whose changes a page may read otherwise (`readPage`). */
const OTHER_SOURCES: ChangeSource[] = [
  async (db, accountId, range) =>
    (await changeRepository.incidentTombstones(db, accountId, range)).map((row) => ({
      seq: row.change_seq,
      type: 'incident',
      op: 'delete',
      id: row.id,
      object: null,
      changed_at: row.changed_at,
    })),
  async (db, accountId, range) =>
    (await changeRepository.users(db, accountId, range)).map(
      ({ change_seq, changed_at, visible, ...user }) => ({
        seq: change_seq,
        type: 'user',
        op: visible === 1 ? 'upsert' : 'delete',
        id: user.id,
        object: visible === 1 ? user : null,
        changed_at,
      }),
    ),
  ...NAMED_RESOURCE_TABLES.map(
    (table): ChangeSource =>
      async (db, accountId, range) =>
        (await changeRepository.namedResources(db, table, accountId, range)).map(
          ({ change_seq, changed_at, visible, ...resource }) => ({
            seq: change_seq,
            type: TYPE_OF[table],
            op: visible === 1 ? 'upsert' : 'delete',
            id: resource.id,
            object: visible === 1 ? resource : null,
            changed_at,
          }),
        ),
  ),
];

const SOURCES: ChangeSource[] = [INCIDENTS, ...OTHER_SOURCES];

/**
 * The first `range.limit` changes of the range, by seq. Each table is one range read of at most
 * that many rows; once a table fills it, no later seq can be among the first, so the tables read
 * after it are read only up to its last seq: a page reads about `limit` rows, not five times that.
 * `sources`: the tables to read, all but those the caller read itself.
 */
async function readChanges(
  db: Kysely<Database>,
  accountId: string,
  range: SeqRange,
  sources = SOURCES,
): Promise<Change[]> {
  const changes: Change[] = [];
  let upTo = range.upTo;
  for (const source of sources) {
    const rows = await source(db, accountId, { ...range, upTo });
    changes.push(...rows);
    const last = rows[range.limit - 1];
    if (last !== undefined) upTo = last.seq;
  }
  return changes.sort((a, b) => a.seq - b.seq).slice(0, range.limit);
}

/** A page of the feed, each change as its JSON (text or UTF-8 bytes), which the route writes as it is. */
export interface RenderedChangesPage {
  data: (string | Uint8Array)[];
  next_cursor: string;
  has_more: boolean;
}

/** A change of a page as the route writes it: its JSON, as text or as UTF-8 bytes. */
interface RenderedChange {
  seq: number;
  json: string | Uint8Array;
}

/**
 * How a COPY row of `changeRepository.incidentsCopied` is written (src/db/copy-ndjson.ts): the
 * bytes `JSON.stringify` writes for the incident's `Change`, one line each.
 */
const INCIDENT_CHANGE_COLUMNS: CopyColumn[] = [
  { before: '{"seq":', kind: 'number' },
  { before: ',"type":"incident","op":"upsert","id":', kind: 'string' },
  ...objectColumns(INCIDENT_FIELDS).map((column, i) =>
    i === 0 ? { ...column, before: `,"object":${column.before}` } : column,
  ),
  { before: '},"changed_at":', kind: 'string' },
];

const LF = 0x0a;
const COMMA = 0x2c;
/** Where a line's seq starts: after `{"seq":`. */
const SEQ_AT = INCIDENT_CHANGE_COLUMNS[0]?.before.length ?? 0;

/** The changes of the lines `ndjson` holds (without their LF), each with its seq. */
function changeLines(ndjson: Buffer): RenderedChange[] {
  const lines: RenderedChange[] = [];
  for (let start = 0; start < ndjson.length;) {
    const end = ndjson.indexOf(LF, start);
    const json = ndjson.subarray(start, end);
    lines.push({ seq: Number(json.toString('latin1', SEQ_AT, json.indexOf(COMMA, SEQ_AT))), json });
    start = end + 1;
  }
  return lines;
}

/**
 * A page's changes, rendered. On PostgreSQL the incidents, nearly all of a catch-up, come as COPY
 * text turned straight into their JSON bytes (no row object, no string per field, no
 * serialization: docs/performance.md, "PostgreSQL reads"); the other tables as for webhooks.
 * SQLite, without COPY, reads every table as objects and serializes each change.
 */
async function readPage(db: Kysely<Database>, accountId: string, range: SeqRange): Promise<RenderedChange[]> {
  const copied = await changeRepository.incidentsCopied(
    db,
    accountId,
    range,
    INCIDENT_FIELDS.map(({ name }) => name),
  );
  const stringified = (change: Change): RenderedChange => ({ seq: change.seq, json: JSON.stringify(change) });
  if (copied === null) return (await readChanges(db, accountId, range)).map(stringified);
  const ndjson = new CopyToNdjson(INCIDENT_CHANGE_COLUMNS);
  const incidents = changeLines(ndjson.push(copied));
  ndjson.end();
  // As `readChanges` does: past a full incidents' read, no other change can be among the first.
  const upTo = incidents[range.limit - 1]?.seq ?? range.upTo;
  const others = await readChanges(db, accountId, { ...range, upTo }, OTHER_SOURCES);
  return [...incidents, ...others.map(stringified)].sort((a, b) => a.seq - b.seq).slice(0, range.limit);
}

const TABLE_OF: Record<Change['type'], RecordTable> = {
  incident: 'incidents',
  user: 'users',
  department: 'departments',
  location: 'locations',
};

/** A change as webhooks send it: with the seq at which its record entered the view (upserts). */
export type EnteredChange = Change & { createdSeq: number };

/**
 * Runs `read` in one read-only snapshot (PostgreSQL: repeatable read; SQLite: a read transaction)
 * with where the account's feed stands in it. The caller's key check or endpoint found the account:
 * it is missing here only in a race with its removal, which reads as an empty feed.
 */
function inFeedSnapshot<T>(
  db: Kysely<Database>,
  accountId: string,
  read: (trx: Kysely<Database>, feed: FeedState) => Promise<T>,
): Promise<T> {
  return db
    .transaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute(async (trx) =>
      read(trx, (await changeRepository.feedState(trx, accountId)) ?? { head: 0, purgedSeq: 0 }),
    );
}

/** The changes feed of one database, with the codec of its cursors. */
export class ChangeFeedService {
  private readonly db: Kysely<Database>;
  /** The codec of this database's cursor key, loaded (or generated) at the first call and kept. */
  readonly cursors: () => Promise<ChangeCursors>;

  constructor(db: Kysely<Database>) {
    this.db = db;
    this.cursors = changeCursorsOf(db);
  }

  /**
   * One page of the account's feed. The head and every table are read in one snapshot (PostgreSQL:
   * a repeatable-read transaction; SQLite: a read transaction), so that the page, its cursor and
   * `has_more` describe one state of the data, whatever commits meanwhile.
   */
  async page(accountId: string, { cursor, limit, retentionDays }: FeedRequest): Promise<RenderedChangesPage> {
    const cursors = await this.cursors();
    const now = Math.floor(Date.now() / 1000);
    const held = cursor === undefined || cursor === LATEST_CURSOR ? null : cursors.decode(accountId, cursor);
    if (held === null && cursor !== undefined && cursor !== LATEST_CURSOR) throw ApiError.invalidCursor();
    if (held !== null && now - held.issuedAt > retentionDays * SECONDS_PER_DAY) {
      throw ApiError.cursorExpired(retentionDays);
    }
    const issue = (position: number, bound: number) =>
      cursors.encode(accountId, { position, bound, issuedAt: now });

    const read = () =>
      inFeedSnapshot(this.db, accountId, async (trx, { head, purgedSeq }) => {
        // A bound past the head is a cursor from data this store no longer has (a restore); a
        // position below the purged seq may have missed a deletion that is gone.
        if (held !== null && (held.bound > head || held.position < purgedSeq)) {
          throw ApiError.cursorExpired(retentionDays);
        }
        if (cursor === LATEST_CURSOR) return { data: [], next_cursor: issue(head, head), has_more: false };

        const position = held?.position ?? 0;
        const bound = held === null || held.position === held.bound ? head : held.bound;
        // One more than the page: whether the pass goes on after it.
        const changes = await readPage(trx, accountId, { after: position, upTo: bound, limit: limit + 1 });
        const data = changes.slice(0, limit);
        // Past the page's last change, the pass holds nothing (the seqs left were records that
        // changed again, beyond the bound): the pass is done, and the next request begins the next.
        const next = changes.length > limit ? (data[limit - 1]?.seq ?? bound) : bound;
        return {
          data: data.map((change) => change.json),
          next_cursor: issue(next, bound),
          has_more: next < head,
        };
      });
    return inSpan(
      'feed.page',
      {
        attributes: { 'feed.limit': limit, 'feed.from_start': cursor === undefined },
        describe: (page) => ({ 'page.items': page.data.length, 'feed.has_more': page.has_more }),
      },
      read,
    );
  }

  /**
   * For webhook deliveries: the first `limit` changes after `after`, each upsert with the seq at
   * which its record entered the public view, and where the feed stands, all read in one snapshot.
   */
  async after(
    accountId: string,
    after: number,
    limit: number,
  ): Promise<{ head: number; purgedSeq: number; changes: EnteredChange[] }> {
    return inFeedSnapshot(this.db, accountId, async (trx, { head, purgedSeq }) => {
      if (head <= after) return { head, purgedSeq, changes: [] };
      const changes = await readChanges(trx, accountId, { after, upTo: head, limit });
      const entered = new Map<Change['type'], Map<string, number>>();
      for (const type of Object.keys(TABLE_OF) as Change['type'][]) {
        const ids = changes.filter((c) => c.type === type && c.op === 'upsert').map((c) => c.id);
        entered.set(type, await changeRepository.createdSeqs(trx, TABLE_OF[type], accountId, ids));
      }
      return {
        head,
        purgedSeq,
        changes: changes.map((change) => ({
          ...change,
          createdSeq: entered.get(change.type)?.get(change.id) ?? 0,
        })),
      };
    });
  }

  /** A `/changes` cursor just after `seq`: a client continues the feed from there. */
  async cursorAfter(accountId: string, seq: number): Promise<string> {
    const cursors = await this.cursors();
    return cursors.encode(accountId, { position: seq, bound: seq, issuedAt: Math.floor(Date.now() / 1000) });
  }
}
