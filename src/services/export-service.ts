import { Readable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { CompiledQuery, Kysely } from 'kysely';
import { IsString, IsUnion, type TObject, type TSchema } from 'typebox';
import { accountRepository } from '../db/repositories/accounts.ts';
import type { NameKey } from '../db/repositories/by-name.ts';
import { incidentRepository } from '../db/repositories/incidents.ts';
import { namedResourceRepository } from '../db/repositories/named-resources.ts';
import { userRepository } from '../db/repositories/users.ts';
import type { Database } from '../db/schema.ts';
import { CopyToNdjson, type JsonField, objectColumns } from '../db/copy-ndjson.ts';
import type { SnapshotSource } from '../db/snapshot.ts';
import { storeFor } from '../db/store.ts';
import {
  DepartmentSchema,
  IncidentSchema,
  LocationSchema,
  toIncident,
  UserSchema,
} from '../schemas/public.ts';
import { INCIDENT_FIELDS } from '../schemas/json-fields.ts';
import { csvLine } from '../lib/csv.ts';
import { tracedPages } from '../telemetry/tracing.ts';
import type { ChangeFeedService } from './change-feed-service.ts';

/**
 * Exports: an account's whole current set of one resource in one streamed response, read from one
 * snapshot of the store (src/db/snapshot.ts) on a connection of its own, in the list endpoint's
 * order and fields, with the feed position of that snapshot so that the changes feed continues
 * exactly where the export stands.
 *
 * Rows are read in keyset chunks, each an index range read; the next chunk is read only when the
 * response has taken the previous one (stream backpressure), after a turn of the event loop, so
 * memory stays bounded whatever the size of the set and other requests are served meanwhile.
 * On PostgreSQL, incidents as NDJSON are instead one COPY of the snapshot, read as fast as the
 * response is sent and turned into lines byte by byte (src/db/copy-ndjson.ts): the same bytes,
 * without a string or an object per row.
 */

export const EXPORT_RESOURCES = ['incidents', 'users', 'departments', 'locations'] as const;
export type ExportResource = (typeof EXPORT_RESOURCES)[number];
export const EXPORT_FORMATS = ['ndjson', 'csv'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

/**
 * Rows per read: what the store reads cheapest (`Store.chunkRows`; docs/performance.md has the
 * measurements behind each store's).
 */
const chunkRowsOf = (db: Kysely<Database>) => storeFor(db).chunkRows;

/** What the body stream reads ahead of the socket (see `open`). */
const STREAM_BUFFER_BYTES = 1024 * 1024;

/** A record as the list endpoint renders it, fields in the list's order. */
type Rendered = Readonly<Record<string, string | number | null>>;

/** A field of the export, as its CSV column. */
interface Column {
  name: string;
  /**
   * Whether the field is text: a string that is not a date (a description, a name, an email).
   * Only text cells are guarded against formulas (`csvCell`, src/lib/csv.ts); numbers and dates are written as
   * they are, a negative number too. Decided by the field's type, never by its value, so that a
   * column never changes shape from one row to the next.
   */
  text: boolean;
}

interface ExportSource {
  /** The fields in the list's order (its response schema's). */
  columns: Column[];
  /** The set in the list's order, chunk by chunk, each record rendered as the list renders it. */
  chunks(db: Kysely<Database>, accountId: string): AsyncGenerator<Rendered[]>;
  /**
   * The same set as one statement, for a store that copies it out (`Snapshot.copyOut`): NDJSON is
   * then written from the copied bytes, with no row object. Where it pays: a large set.
   */
  copy?: CopySource;
}

interface CopySource {
  /** The fields as JSON values (strings or numbers), in the list's order: the statement's columns. */
  fields: JsonField[];
  query(db: Kysely<Database>, accountId: string): CompiledQuery;
}

function isText(schema: TSchema): boolean {
  // A nullable field is the union of its type and null.
  return (IsUnion(schema) ? schema.anyOf : [schema]).some(
    (type) =>
      IsString(type) && !('format' in type && (type.format === 'date' || type.format === 'date-time')),
  );
}

const columnsOf = (schema: TObject): Column[] =>
  Object.entries(schema.properties).map(([name, type]) => ({ name, text: isText(type) }));

/** Walks a by-name list (users, departments, locations) in chunks, dropping the walk's key. */
async function* byName<Row extends NameKey>(
  db: Kysely<Database>,
  read: (after: NameKey | null, limit: number) => Promise<Row[]>,
): AsyncGenerator<Omit<Row, 'name_key'>[]> {
  const chunkRows = chunkRowsOf(db);
  let after: NameKey | null = null;
  for (;;) {
    const rows = await read(after, chunkRows);
    if (rows.length > 0) yield rows.map(({ name_key: _key, ...record }) => record);
    const last = rows.at(-1);
    if (last === undefined || rows.length < chunkRows) return;
    after = { name_key: last.name_key, id: last.id };
  }
}

const SOURCES: Record<ExportResource, ExportSource> = {
  incidents: {
    columns: columnsOf(IncidentSchema),
    copy: {
      fields: INCIDENT_FIELDS,
      query: (db, accountId) =>
        incidentRepository.copyQuery(
          db,
          accountId,
          INCIDENT_FIELDS.map(({ name }) => name),
        ),
    },
    async *chunks(db, accountId) {
      const chunkRows = chunkRowsOf(db);
      const read = (below: number | null) => {
        const rows = incidentRepository.listBelowPosition(db, accountId, below, chunkRows);
        // A read that fails while the chunk before it is still being sent is handled when awaited
        // (or in `finally`), not reported as an unhandled rejection meanwhile.
        rows.catch(() => {});
        return rows;
      };
      let next = read(null);
      try {
        for (;;) {
          const rows = await next;
          const last = rows.at(-1);
          const more = last !== undefined && rows.length === chunkRows;
          // The next read is under way while this chunk is rendered and sent: PostgreSQL reads
          // meanwhile (SQLite reads at once, in this process: nothing changes there).
          if (more) next = read(last.position);
          if (rows.length > 0) yield rows.map(toIncident);
          if (!more) return;
        }
      } finally {
        // However the walk ends (the response went away, a read failed), no read is left running
        // when the snapshot is released; its failure, if any, is the one already reported.
        await next.catch(() => {});
      }
    },
  },
  users: {
    columns: columnsOf(UserSchema),
    chunks: (db, accountId) =>
      byName(db, (after, limit) => userRepository.listVisibleAfter(db, accountId, after, limit)),
  },
  departments: {
    columns: columnsOf(DepartmentSchema),
    chunks: (db, accountId) =>
      byName(db, (after, limit) =>
        namedResourceRepository.listActiveAfter(db, 'departments', accountId, after, limit),
      ),
  },
  locations: {
    columns: columnsOf(LocationSchema),
    chunks: (db, accountId) =>
      byName(db, (after, limit) =>
        namedResourceRepository.listActiveAfter(db, 'locations', accountId, after, limit),
      ),
  },
};

/** The header row: the field names. */
const csvHeader = (columns: Column[]) => csvLine(columns.map(({ name }) => name));

/**
 * Room for a line of a record, before a longer one makes the chunk's buffer grow: an incident's
 * line is about 360 bytes, and a chunk's buffer stays below glibc's 128 KiB, above which every
 * allocation is fresh memory from the system.
 */
const LINE_BYTES = 400;
const LINE_FEED = 0x0a;

/**
 * Records as lines of the format (NDJSON, or CSV rows of `columns`), each written into the chunk's
 * bytes as soon as it is made. The chunk's text is never one string: joining the lines made a
 * rope that had to be flattened into a second copy before the stream turned it into bytes, and
 * kept every line alive until then, so that more of the young generation survived each collection
 * and V8 grew it further (docs/performance.md).
 */
function lines(format: ExportFormat, columns: Column[], records: Rendered[]): Buffer {
  let bytes = Buffer.allocUnsafeSlow(records.length * LINE_BYTES);
  let used = 0;
  const text = columns.map((column) => column.text);
  for (const record of records) {
    const line =
      format === 'ndjson'
        ? JSON.stringify(record)
        : csvLine(
            columns.map(({ name }) => record[name]),
            text,
          );
    // A UTF-16 code unit is at most 3 bytes of UTF-8; 1 more for NDJSON's line feed.
    const most = line.length * 3 + 1;
    if (bytes.length - used < most) {
      const larger = Buffer.allocUnsafeSlow(Math.max(bytes.length * 2, used + most));
      bytes.copy(larger, 0, 0, used);
      bytes = larger;
    }
    used += bytes.write(line, used);
    if (format === 'ndjson') used = bytes.writeUInt8(LINE_FEED, used);
  }
  return bytes.subarray(0, used);
}

/** The response body, in chunks of bytes: NDJSON lines, or CSV (RFC 4180, CRLF) after a header row. */
async function* encode(source: ExportSource, records: AsyncGenerator<Rendered[]>, format: ExportFormat) {
  const { columns } = source;
  if (format === 'csv') yield Buffer.from(csvHeader(columns));
  for await (const chunk of records) yield lines(format, columns, chunk);
}

/**
 * The body's chunks, the first at once and each later one after the event loop has had a turn:
 * other requests are served between them. Without it a copy whose data is already waiting in the
 * socket is read, turned into lines and written in one run of promise callbacks, and page 1 fell
 * from 16,000 to 520 requests a second beside an export (docs/performance.md).
 */
async function* takingTurns(chunks: AsyncIterable<Buffer>) {
  let first = true;
  for await (const chunk of chunks) {
    if (!first) await nextTurn();
    first = false;
    yield chunk;
  }
}

/** A whole export file of these records, as the endpoint writes it (the document's examples). */
export function exportFile(resource: ExportResource, format: ExportFormat, records: Rendered[]): string {
  const { columns } = SOURCES[resource];
  return (format === 'csv' ? csvHeader(columns) : '') + lines(format, columns, records).toString();
}

/**
 * NDJSON from COPY's text rows (`Snapshot.copyOut`), chunk by chunk as they arrive, each chunk's
 * whole rows at once: the connection is read only as fast as the response is sent.
 */
async function* copiedLines(rows: AsyncGenerator<Buffer>, fields: JsonField[]) {
  const ndjson = new CopyToNdjson(objectColumns(fields));
  for await (const chunk of rows) {
    const lines = ndjson.push(chunk);
    if (lines.length > 0) yield lines;
  }
  ndjson.end();
}

export interface Export {
  /** The changes feed cursor of the snapshot's position: `/changes` continues from here. */
  cursor: string;
  /** The body; reading it to its end, destroying it or a failure releases the snapshot. */
  body: Readable;
}

/** The exports of one database, read from its snapshots, with cursors of its changes feed. */
export class ExportService {
  private readonly snapshots: SnapshotSource;
  private readonly feed: ChangeFeedService;

  constructor(snapshots: SnapshotSource, feed: ChangeFeedService) {
    this.snapshots = snapshots;
    this.feed = feed;
  }

  /**
   * Opens a snapshot and reads its feed head; the rows are read as `body` is. A failure here (the
   * store unavailable) comes before any byte of the response.
   */
  async open(accountId: string, resource: ExportResource, format: ExportFormat): Promise<Export> {
    const cursors = await this.feed.cursors();
    const snapshot = await this.snapshots.open();
    let head: number;
    try {
      // The snapshot's first read: the head and every row after it come from the same state.
      head = (await accountRepository.findById(snapshot.db, accountId))?.data_version ?? 0;
    } catch (error) {
      await snapshot.release();
      throw error;
    }
    const source = SOURCES[resource];
    const { copyOut } = snapshot;
    // PostgreSQL copies incidents out as NDJSON; the rest is read and rendered row by row.
    // With tracing on: a span per page read (a COPY, one for all of it), children of the request's.
    const attributes = { 'export.resource': resource, 'export.format': format };
    const bytes =
      format === 'ndjson' && copyOut !== null && source.copy !== undefined
        ? copiedLines(
            tracedPages('export.copy', attributes, copyOut(source.copy.query(snapshot.db, accountId)), {
              whole: true,
            }),
            source.copy.fields,
          )
        : encode(
            source,
            tracedPages('export.page', attributes, source.chunks(snapshot.db, accountId)),
            format,
          );
    const body = Readable.from(takingTurns(bytes), {
      objectMode: false,
      // Up to 1 MiB (a few reads) may wait for the socket. With the default 64 KiB every read
      // waited for the client to drain the one before: a million incidents took 5.1 s instead of
      // 3.9 s, for no saving in memory.
      highWaterMark: STREAM_BUFFER_BYTES,
    });
    // 'close' comes once the generator has finished, also when destroyed before it started or in
    // the middle of a read (Readable.from waits for the generator's return): never under a query.
    body.once('close', () => {
      snapshot.release().catch(() => {});
    });
    const issuedAt = Math.floor(Date.now() / 1000);
    return { cursor: cursors.encode(accountId, { position: head, bound: head, issuedAt }), body };
  }
}
