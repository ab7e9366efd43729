import { createReadStream } from 'node:fs';
import type { MessagePort } from 'node:worker_threads';
import { open, readFile } from 'node:fs/promises';
import { StringDecoder } from 'node:string_decoder';
import { InputError } from '../errors.ts';
import type { AccountIncidentKey } from '../db/repositories/incidents.ts';
import {
  EXPORT_ONLY_TYPES,
  type ExportOnlyType,
  Fields,
  incidentKey,
  RECORD_FORMS,
  RECORD_TYPES,
  type RecordType,
  type ValidRecord,
  validateRecord,
} from './validation.ts';

/**
 * Reading an import file: its records, parsed and validated, in file order, a read's worth at a
 * time. This is the CPU-heavy half of an import and needs no database, so `import.ts` runs it in
 * a worker thread (`worker.ts`) while the main thread writes the previous records.
 */

/** A validated record and its place in the file (`line 12`, `incidents[3]`). */
export interface PlacedRecord {
  where: string;
  record: ValidRecord;
}

interface SourceRecord {
  where: string;
  type: RecordType;
  value: unknown;
}

/** The sections of a .json file and the record type each holds, in dependency order. */
const JSON_SECTIONS: Record<string, RecordType> = Object.fromEntries(
  RECORD_TYPES.map((type) => [RECORD_FORMS[type].plural, type]),
);

/**
 * The longest NDJSON line read: a record's longest field is 100,000 characters (an incident's
 * description), six times that written as JSON escapes, with room for every other field.
 */
const MAX_LINE_CHARS = 1_000_000;

/**
 * Bytes of the file read at a time: each read becomes one chunk of records (about 300 incidents).
 * The reading thread's young generation is small (`import.ts`); a read's lines, parsed objects and
 * validated rows must die there rather than be promoted and collected again in the old one. With
 * 1 MiB reads, garbage collection took a third of the reading thread's time, and a million
 * incidents took 20.9–22.0 s to import on SQLite, against 16.1–19.4 s with these.
 */
const READ_BYTES = 128 * 1024;

/** A line break as readline sees one: `\r\n`, `\n` or a lone `\r`. */
const LINE_BREAK = /\r\n|\n|\r/;

/**
 * The lines of a file, a read's worth at a time. readline hands over one line per event and costs
 * more than parsing the line at tens of thousands of lines a second; splitting each chunk at once
 * does not. Line breaks and numbering are readline's (`crlfDelay: Infinity`).
 */
async function* readLines(path: string): AsyncGenerator<string[]> {
  const decoder = new StringDecoder('utf8');
  // Text after the last `\n` read so far: its breaks are only known once the line is complete.
  let rest = '';
  let linesRead = 0;
  for await (const chunk of createReadStream(path, { highWaterMark: READ_BYTES })) {
    const text = rest + decoder.write(chunk as Buffer);
    const end = text.lastIndexOf('\n');
    if (end === -1) {
      // The reader's memory is bounded (`import.ts`): a line no record could fill is refused
      // before it is held whole.
      if (text.length > MAX_LINE_CHARS)
        throw new InputError(
          `line ${linesRead + 1}: longer than ${MAX_LINE_CHARS.toLocaleString('en-US')} characters, more than any record can be`,
        );
      rest = text;
      continue;
    }
    rest = text.slice(end + 1);
    const complete = text.slice(0, text[end - 1] === '\r' ? end - 1 : end);
    const lines = complete.includes('\r') ? complete.split(LINE_BREAK) : complete.split('\n');
    linesRead += lines.length;
    yield lines;
  }
  rest += decoder.end();
  if (rest === '') return;
  const lines = rest.split(LINE_BREAK);
  // A break at the very end ends the last line rather than starting an empty one.
  if (lines.at(-1) === '') lines.pop();
  yield lines;
}

/** Lines of an `accounts export` an import skips (`EXPORT_ONLY_TYPES`), per type. */
export type SkippedCounts = Partial<Record<ExportOnlyType, number>>;

/** The records of an NDJSON file, a chunk of lines at a time; export-only lines are counted in `skipped`. */
async function* readNdjson(path: string, skipped: SkippedCounts): AsyncGenerator<SourceRecord[]> {
  let lineNumber = 0;
  for await (const lines of readLines(path)) {
    const records: SourceRecord[] = [];
    try {
      for (const line of lines) {
        lineNumber += 1;
        if (line.trim() === '') continue;
        const record = parseLine(line, `line ${lineNumber}`);
        if (typeof record === 'string') skipped[record] = (skipped[record] ?? 0) + 1;
        else records.push(record);
      }
    } catch (error) {
      // The records before a malformed line are checked first, as they would be one by one.
      yield records;
      throw error;
    }
    yield records;
  }
}

/** The record of a line, or the type of an export-only line, which is not read further. */
function parseLine(line: string, where: string): SourceRecord | ExportOnlyType {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (error) {
    throw new InputError(`${where}: not valid JSON (${(error as Error).message})`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InputError(`${where}: must be a JSON object`);
  }
  const type = (value as { type?: unknown }).type;
  if (typeof type === 'string' && (EXPORT_ONLY_TYPES as readonly string[]).includes(type)) {
    return type as ExportOnlyType;
  }
  if (typeof type !== 'string' || !(RECORD_TYPES as readonly string[]).includes(type)) {
    throw new InputError(
      `${where}: field "type" must be one of ${RECORD_TYPES.join(', ')} (got ${JSON.stringify(type)})`,
    );
  }
  return { where, type: type as RecordType, value };
}

/** Records of a .json section per chunk: about what one read of NDJSON holds (READ_BYTES). */
const JSON_RECORDS_PER_CHUNK = 300;

/**
 * An upper bound of the records of an NDJSON file: its lines, counted as `readLines` counts them.
 * Read as bytes, without decoding or parsing: 0.15 s of CPU for 200,000 incidents with every field
 * set (137 MB), about 3% of their import.
 */
export async function countLines(path: string): Promise<number> {
  let lines = 0;
  // Whether the last byte read was a `\r`, and whether it ended a line that has text.
  let afterCr = false;
  let lineOpen = false;
  for await (const chunk of createReadStream(path, { highWaterMark: READ_BYTES })) {
    const bytes = chunk as Buffer;
    if (bytes.length === 0) continue;
    // A `\r` ends a line unless a `\n` follows it, which then ends it.
    for (let at = bytes.indexOf(LF); at !== -1; at = bytes.indexOf(LF, at + 1)) lines += 1;
    for (let at = bytes.indexOf(CR); at !== -1; at = bytes.indexOf(CR, at + 1)) {
      if (at + 1 < bytes.length && bytes[at + 1] !== LF) lines += 1;
    }
    if (afterCr && bytes[0] !== LF) lines += 1;
    const last = bytes[bytes.length - 1];
    afterCr = last === CR;
    lineOpen = last !== LF && last !== CR;
  }
  return lines + (afterCr || lineOpen ? 1 : 0);
}

const LF = 0x0a;
const CR = 0x0d;

async function* readJson(path: string, parsed: ParsedJson): AsyncGenerator<SourceRecord[]> {
  let document: unknown;
  try {
    document = JSON.parse(await readFile(path, 'utf8'));
  } catch (error) {
    throw new InputError(`not valid JSON (${(error as Error).message})`);
  }
  if (typeof document !== 'object' || document === null || Array.isArray(document)) {
    throw new InputError(
      `the file must hold one JSON object with arrays ${Object.keys(JSON_SECTIONS).join(', ')}`,
    );
  }
  for (const key of Object.keys(document)) {
    if (!(key in JSON_SECTIONS))
      throw new InputError(`"${key}" is not a section (expected ${Object.keys(JSON_SECTIONS).join(', ')})`);
  }
  parsed.records = Object.keys(JSON_SECTIONS).reduce((sum, section) => {
    const records = (document as Record<string, unknown>)[section];
    return sum + (Array.isArray(records) ? records.length : 0);
  }, 0);
  const incidents = (document as Record<string, unknown>)[RECORD_FORMS.incident.plural];
  if (Array.isArray(incidents)) parsed.incidents = incidents;
  // Sections are read in dependency order whatever their order in the file.
  for (const [section, type] of Object.entries(JSON_SECTIONS)) {
    const records = (document as Record<string, unknown>)[section];
    if (records === undefined) continue;
    if (!Array.isArray(records)) throw new InputError(`"${section}" must be an array`);
    // In slices, so that each message to the main thread stays as small as an NDJSON read's.
    for (let start = 0; start < records.length; start += JSON_RECORDS_PER_CHUNK) {
      yield records
        .slice(start, start + JSON_RECORDS_PER_CHUNK)
        .map((value, offset) => ({ where: `${section}[${start + offset}]`, type, value }));
    }
  }
}

/** What a .json file holds, once it is parsed (`validatedChunks`): its records, and its incidents. */
export interface ParsedJson {
  records?: number;
  incidents?: unknown[];
}

/**
 * The validated records of a .json or .ndjson file, a chunk at a time. A bad record ends the
 * sequence: the valid records before it are yielded first, then its InputError is thrown, so the
 * consumer sees problems in file order whichever of them (file or database) it detects. A .json
 * file's records are counted, and its incidents kept, in `parsed` before its first chunk.
 */
export async function* validatedChunks(
  path: string,
  format: '.json' | '.ndjson',
  now: string,
  skipped: SkippedCounts = {},
  parsed: ParsedJson = {},
): AsyncGenerator<PlacedRecord[]> {
  for await (const records of format === '.json' ? readJson(path, parsed) : readNdjson(path, skipped)) {
    const chunk: PlacedRecord[] = [];
    try {
      for (const { where, type, value } of records) {
        chunk.push({ where, record: validateRecord(type, value, where, now) });
      }
    } catch (error) {
      yield chunk;
      throw error;
    }
    yield chunk;
  }
}

/**
 * The keys (`incidentKey`) of the file's incident records that write an incident, in file order
 * (deletions and other records are left out), a read's worth at a time: what an import ranks
 * before it writes a file out of order (import.ts). Reading only the keys costs about as much as
 * reading the bytes. A line whose record the reading will refuse is left out here: the import
 * fails there anyway. A .json file's incidents are those `validatedChunks` kept in `parsed`.
 *
 * An NDJSON line as JSON.stringify writes it (every export) is read without decoding or parsing
 * it: each field from the first `"name":"` in the line. That may not be what parsing the line
 * gives (a name given twice, or written with escapes); the import checks each record it takes
 * against its key (`FileRanks` in import.ts), and any line that does not read that way (no such
 * field, an escape in the value, a deletion) is parsed and validated as the reading does.
 */
export async function* incidentKeys(
  path: string,
  format: '.json' | '.ndjson',
  now: string,
  parsed: ParsedJson,
): AsyncGenerator<AccountIncidentKey[]> {
  if (format === '.json') {
    const incidents = parsed.incidents ?? [];
    for (let start = 0; start < incidents.length; start += KEYS_PER_CHUNK) {
      yield incidents.slice(start, start + KEYS_PER_CHUNK).flatMap((value) => {
        if (typeof value !== 'object' || value === null) return [];
        const f = new Fields('', value as Record<string, unknown>);
        return attempt(() => (f.flag('deleted', false) === 1 ? null : incidentKey(f, now)));
      });
    }
    return;
  }
  // One buffer for the whole reading: the lines are read where they were read into, and the file's
  // bytes are not left to the garbage collector a read at a time.
  const file = await open(path);
  try {
    let buffer = Buffer.allocUnsafe(READ_BYTES * 8);
    // Bytes in `buffer`: the start of a line the last read did not end, then the new read.
    let filled = 0;
    for (;;) {
      if (filled === buffer.length) {
        // The reading refuses a line this long; the keys need not go further.
        if (buffer.length > MAX_LINE_CHARS * 4) return;
        const larger = Buffer.allocUnsafe(buffer.length * 2);
        buffer.copy(larger, 0, 0, filled);
        buffer = larger;
      }
      const { bytesRead } = await file.read(buffer, filled, buffer.length - filled, null);
      const bytes = buffer.subarray(0, filled + bytesRead);
      const keys: AccountIncidentKey[] = [];
      if (bytesRead === 0) {
        if (filled > 0) lineKeys(bytes, now, keys);
        yield keys;
        return;
      }
      let start = 0;
      for (let end = bytes.indexOf(LF); end !== -1; start = end + 1, end = bytes.indexOf(LF, start)) {
        lineKeys(bytes.subarray(start, end), now, keys);
      }
      filled = bytes.copy(buffer, 0, start);
      yield keys;
    }
  } finally {
    await file.close();
  }
}

/** Keys per chunk of a .json file's incidents: about as many as a read of NDJSON holds. */
const KEYS_PER_CHUNK = 2000;

/** The key `read` gives, none if it throws (the record is refused) or gives null (not an incident). */
function attempt(read: () => AccountIncidentKey | null): AccountIncidentKey[] {
  try {
    const key = read();
    return key === null ? [] : [key];
  } catch {
    return [];
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
/** How each field a key needs starts in a line as JSON.stringify writes it. */
const STARTS = {
  type: Buffer.from('"type":"'),
  id: Buffer.from('"id":"'),
  account_id: Buffer.from('"account_id":"'),
  created_at: Buffer.from('"created_at":"'),
};
const DELETED = Buffer.from('"deleted"');

/**
 * Adds the key of the record on `line` (bytes between two `\n`, as `readLines` splits them) to
 * `keys` if it is an incident's: read from the bytes when it can be (`incidentKeys`), otherwise
 * parsed and validated.
 */
function lineKeys(line: Buffer, now: string, keys: AccountIncidentKey[]): void {
  const type = plainString(line, STARTS.type);
  if (type !== null && type !== 'incident') return;
  if (type !== null && line.indexOf(DELETED) === -1) {
    const id = plainString(line, STARTS.id);
    const accountId = plainString(line, STARTS.account_id);
    const createdAt = plainString(line, STARTS.created_at);
    if (id !== null && accountId !== null && createdAt !== null) {
      const f = new Fields('', { id, account_id: accountId, created_at: createdAt });
      const [key] = attempt(() => incidentKey(f, now));
      if (key !== undefined) {
        keys.push(key);
        return;
      }
    }
  }
  for (const each of line.toString('utf8').split(LINE_BREAK)) {
    if (each.trim() === '') continue;
    keys.push(
      ...attempt(() => {
        const record = parseLine(each, '');
        if (typeof record === 'string' || record.type !== 'incident') return null;
        const valid = validateRecord(record.type, record.value, '', now);
        if (valid.type !== 'incident' || valid.deleted) return null;
        const { id, account_id: accountId, created_at: createdAt } = valid.row;
        return { id, account_id: accountId, created_at: createdAt };
      }),
    );
  }
}

/**
 * The string after the first `start` (`"name":"`) in `line`, when it holds no backslash and is
 * ASCII (as an id, a date-time or a type is); otherwise null.
 */
function plainString(line: Buffer, start: Buffer): string | null {
  const at = line.indexOf(start);
  if (at === -1) return null;
  const from = at + start.length;
  const to = line.indexOf(QUOTE, from);
  if (to === -1) return null;
  for (let i = from; i < to; i += 1) if ((line[i] as number) >= 0x80 || line[i] === BACKSLASH) return null;
  return line.toString('latin1', from, to);
}

/** What `worker.ts` is asked to read. */
export interface ReadRequest {
  path: string;
  format: '.json' | '.ndjson';
  now: string;
}

/**
 * A chunk of records as it crosses from the worker to the main thread. Copying a message costs
 * most per object property: a million records as objects took the main thread about 4 s to
 * receive, as flat values and rebuilt with `unpackChunk` about half that.
 */
export interface PackedChunk {
  wheres: string[];
  /** Each record's kind: its type's index in RECORD_TYPES, plus RECORD_TYPES.length for a deletion. */
  kinds: number[];
  /** The row fields of each kind in the chunk, in the order `values` holds them. */
  fields: Record<number, string[]>;
  /** The rows' field values, one record after another. */
  values: unknown[];
}

export function packChunk(records: PlacedRecord[]): PackedChunk {
  const chunk: PackedChunk = { wheres: [], kinds: [], fields: {}, values: [] };
  for (const { where, record } of records) {
    const row = record.row as Record<string, unknown>;
    const kind = RECORD_TYPES.indexOf(record.type) + (record.deleted ? RECORD_TYPES.length : 0);
    // validateRecord builds every row of a kind with the same fields in the same order.
    const fields = (chunk.fields[kind] ??= Object.keys(row));
    chunk.wheres.push(where);
    chunk.kinds.push(kind);
    for (const field of fields) chunk.values.push(row[field]);
  }
  return chunk;
}

export function unpackChunk(chunk: PackedChunk): PlacedRecord[] {
  const records: PlacedRecord[] = [];
  let next = 0;
  for (let i = 0; i < chunk.wheres.length; i += 1) {
    const kind = chunk.kinds[i] as number;
    const type = RECORD_TYPES[kind % RECORD_TYPES.length] as RecordType;
    const row: Record<string, unknown> = {};
    for (const field of chunk.fields[kind] as string[]) row[field] = chunk.values[next++];
    const deleted = kind >= RECORD_TYPES.length;
    records.push({ where: chunk.wheres[i] as string, record: { type, deleted, row } as ValidRecord });
  }
  return records;
}

/**
 * What `worker.ts` posts: chunks in file order, then `done` or the failure that ended the reading;
 * and, whenever it is asked (`ReadControl`), an upper bound of the file's records.
 */
export type ReadMessage =
  | { chunk: PackedChunk }
  | { done: true; skipped: SkippedCounts }
  | { failure: { message: string; input: boolean } }
  | { recordsAtMost: number };

/**
 * What the main thread tells `worker.ts`: a chunk was taken (it may read further), it wants
 * `recordsAtMost`, or it wants the file's incident keys (`incidentKeys`) on a port of their own.
 */
export type ReadControl = 'taken' | 'count' | { keys: MessagePort };

/**
 * What `worker.ts` posts on the keys' port: keys as flat values (account, creation time and id of
 * one incident after another), then `done` or the failure that ended the reading. The main thread
 * answers each chunk it has taken with `taken`.
 */
export type KeysMessage = { keys: string[] } | { done: true } | { failure: string };

export function packKeys(keys: AccountIncidentKey[]): string[] {
  return keys.flatMap((key) => [key.account_id, key.created_at, key.id]);
}

export function unpackKeys(values: string[]): AccountIncidentKey[] {
  const keys: AccountIncidentKey[] = [];
  for (let i = 0; i < values.length; i += 3) {
    keys.push({
      account_id: values[i] as string,
      created_at: values[i + 1] as string,
      id: values[i + 2] as string,
    });
  }
  return keys;
}

/**
 * Chunks the worker may post before the main thread has taken them (it answers each one it takes),
 * so the worker reads ahead of the writes by a bounded amount and memory does not grow with the file:
 * 1 MiB of the file. The records ahead are already in the writing thread's heap, where more of them
 * cost more collection (4 MiB ahead was slower); fewer leave the reader waiting while a batch is written.
 */
export const CHUNKS_AHEAD = 8;
