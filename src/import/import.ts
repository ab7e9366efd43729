import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { extname } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import type { Kysely } from 'kysely';
import { withBulkWriteCache } from '../db/database.ts';
import { accountRepository } from '../db/repositories/accounts.ts';
import { type IncidentInput, incidentRepository } from '../db/repositories/incidents.ts';
import { namedResourceRepository } from '../db/repositories/named-resources.ts';
import { type AccountOwnedTable, existingOwners } from '../db/repositories/ownership.ts';
import { userRepository } from '../db/repositories/users.ts';
import type { Database } from '../db/schema.ts';
import { InputError } from '../errors.ts';
import { RECORD_TYPES, type RecordType, type ValidRecord, validateRecord } from './records.ts';

/**
 * `safety-api import FILE`: loads a .json or .ndjson file in one transaction. Records are
 * validated and written in batches as they are read, so an NDJSON file of any size streams through
 * in constant memory; the first bad record rolls everything back and is named in the error.
 */

export type ImportSummary = Record<RecordType, number>;

interface SourceRecord {
  where: string;
  type: RecordType;
  value: unknown;
  extraFields: readonly string[];
}

/** Envelope fields of an NDJSON record, beside the record's own. */
const NDJSON_ENVELOPE = ['type'] as const;

/**
 * Records written per statement. Larger batches amortize the per-statement work (2,000 took about
 * a tenth less CPU than 1,000 here); 2,000 incidents bind 24,000 parameters, below SQLite's
 * (32,766) and PostgreSQL's (65,535) limits.
 */
const BATCH_SIZE = 2000;

type IncidentKey = { created_at: string; id: string };

interface IncidentChange {
  /** Incidents of the account before this import. */
  before: number;
  /** Incident records of the account in this import (inserts and updates). */
  records: number;
  /** Largest (created_at, id) seen so far, in the store or in this import. */
  newest: IncidentKey | null;
  /** Smallest key that arrived after a larger one; `null` while the records came in order. */
  disorderFrom: IncidentKey | null;
}

/** Paging order: (created_at, id) ascending, as `rerank` counts it. */
function compareKeys(a: IncidentKey, b: IncidentKey): number {
  if (a.created_at !== b.created_at) return a.created_at < b.created_at ? -1 : 1;
  return a.id === b.id ? 0 : a.id < b.id ? -1 : 1;
}
const JSON_SECTIONS: Record<string, RecordType> = {
  accounts: 'account',
  departments: 'department',
  locations: 'location',
  users: 'user',
  incidents: 'incident',
};

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
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) {
    const text = rest + decoder.write(chunk as Buffer);
    const end = text.lastIndexOf('\n');
    if (end === -1) {
      rest = text;
      continue;
    }
    rest = text.slice(end + 1);
    const complete = text.slice(0, text[end - 1] === '\r' ? end - 1 : end);
    yield complete.includes('\r') ? complete.split(LINE_BREAK) : complete.split('\n');
  }
  rest += decoder.end();
  if (rest === '') return;
  const lines = rest.split(LINE_BREAK);
  // A break at the very end ends the last line rather than starting an empty one.
  if (lines.at(-1) === '') lines.pop();
  yield lines;
}

/** The records of an NDJSON file, a chunk of lines at a time. */
async function* readNdjson(path: string): AsyncGenerator<SourceRecord[]> {
  let lineNumber = 0;
  for await (const lines of readLines(path)) {
    const records: SourceRecord[] = [];
    try {
      for (const line of lines) {
        lineNumber += 1;
        if (line.trim() === '') continue;
        records.push(parseLine(line, `line ${lineNumber}`));
      }
    } catch (error) {
      // The records before a malformed line are checked first, as they would be one by one.
      yield records;
      throw error;
    }
    yield records;
  }
}

function parseLine(line: string, where: string): SourceRecord {
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
  if (typeof type !== 'string' || !(RECORD_TYPES as readonly string[]).includes(type)) {
    throw new InputError(
      `${where}: field "type" must be one of ${RECORD_TYPES.join(', ')} (got ${JSON.stringify(type)})`,
    );
  }
  return { where, type: type as RecordType, value, extraFields: NDJSON_ENVELOPE };
}

async function* readJson(path: string): AsyncGenerator<SourceRecord[]> {
  let document: unknown;
  try {
    document = JSON.parse(await readFile(path, 'utf8'));
  } catch (error) {
    throw new InputError(`not valid JSON (${(error as Error).message})`);
  }
  if (typeof document !== 'object' || document === null || Array.isArray(document)) {
    throw new InputError(
      'the file must hold one JSON object with arrays accounts, departments, locations, users, incidents',
    );
  }
  for (const key of Object.keys(document)) {
    if (!(key in JSON_SECTIONS))
      throw new InputError(`"${key}" is not a section (expected ${Object.keys(JSON_SECTIONS).join(', ')})`);
  }
  // Sections are read in dependency order whatever their order in the file.
  for (const [section, type] of Object.entries(JSON_SECTIONS)) {
    const records = (document as Record<string, unknown>)[section];
    if (records === undefined) continue;
    if (!Array.isArray(records)) throw new InputError(`"${section}" must be an array`);
    yield records.map((value, index) => ({ where: `${section}[${index}]`, type, value, extraFields: [] }));
  }
}

interface Pending<Row> {
  where: string;
  row: Row;
}

/** Holds the validated records of one transaction until a batch is written. */
class Batches {
  readonly counts: ImportSummary = { account: 0, department: 0, location: 0, user: 0, incident: 0 };
  private readonly pending: { [T in RecordType]: Pending<Extract<ValidRecord, { type: T }>['row']>[] } = {
    account: [],
    department: [],
    location: [],
    user: [],
    incident: [],
  };
  private readonly pendingIds: { [T in RecordType]: Set<string> } = {
    account: new Set(),
    department: new Set(),
    location: new Set(),
    user: new Set(),
    incident: new Set(),
  };
  private size = 0;
  /** Accounts known to exist, in the store or earlier in this import. */
  private readonly knownAccounts = new Set<string>();
  /** Email (lower case) of every user in this import, with its id and place. */
  private readonly emails = new Map<string, { id: string; where: string }>();
  /** Every account a record of this import names: its public data (and so its data version) changes. */
  readonly touchedAccounts = new Set<string>();
  /** Per account whose incidents this import writes: what `refreshIncidentOrder` needs to know. */
  readonly incidentChanges = new Map<string, IncidentChange>();

  constructor(private readonly db: Kysely<Database>) {}

  /**
   * Takes one record. Returns a promise only when the record needs the database first (an account
   * seen for the first time, a full batch): most records are taken without a turn of the event loop.
   */
  add(where: string, record: ValidRecord): Promise<void> | undefined {
    if (
      this.pendingIds[record.type].has(record.row.id) ||
      (record.type !== 'account' && !this.knownAccounts.has(record.row.account_id)) ||
      (record.type === 'incident' && !this.incidentChanges.has(record.row.account_id))
    ) {
      return this.addAfterLookups(where, record);
    }
    this.take(where, record);
    return this.size >= BATCH_SIZE ? this.flush() : undefined;
  }

  private async addAfterLookups(where: string, record: ValidRecord): Promise<void> {
    // The same id twice in one batch: write the first before taking the second (last one wins).
    if (this.pendingIds[record.type].has(record.row.id)) await this.flush();
    if (record.type !== 'account') await this.requireAccount(where, record.row.account_id);
    if (record.type === 'incident') await this.startIncidentChange(record.row.account_id);
    this.take(where, record);
    if (this.size >= BATCH_SIZE) await this.flush();
  }

  private take(where: string, record: ValidRecord): void {
    if (record.type === 'user') this.claimEmail(where, record.row.id, record.row.email);
    if (record.type === 'account') this.knownAccounts.add(record.row.id);
    this.touchedAccounts.add(record.type === 'account' ? record.row.id : record.row.account_id);
    if (record.type === 'incident') this.placeIncident(record.row);

    (this.pending[record.type] as Pending<unknown>[]).push({ where, row: record.row });
    this.pendingIds[record.type].add(record.row.id);
    this.counts[record.type] += 1;
    this.size += 1;
  }

  private async requireAccount(where: string, accountId: string): Promise<void> {
    if (this.knownAccounts.has(accountId)) return;
    if ((await accountRepository.findById(this.db, accountId)) === undefined) {
      throw new InputError(
        `${where}: field "account_id" names no account ("${accountId}"): import the account first`,
      );
    }
    this.knownAccounts.add(accountId);
  }

  private claimEmail(where: string, id: string, email: string): void {
    const key = email.toLowerCase();
    const earlier = this.emails.get(key);
    if (earlier !== undefined && earlier.id !== id) {
      throw new InputError(
        `${where}: field "email" "${email}" is already used by the user at ${earlier.where}`,
      );
    }
    this.emails.set(key, { id, where });
  }

  private async startIncidentChange(accountId: string): Promise<void> {
    if (this.incidentChanges.has(accountId)) return;
    const before = await incidentRepository.countForAccount(this.db, accountId);
    const newest = await incidentRepository.newestKey(this.db, accountId);
    this.incidentChanges.set(accountId, { before, records: 0, newest, disorderFrom: null });
  }

  /**
   * Gives an incident the position it would have if the file continued the account's order: the
   * account's count before the import plus its place among the new records. That guess is the true
   * rank for every record that arrives after all smaller keys and before all larger ones, so an
   * export loaded in order needs no re-ranking at all; `disorderFrom` marks where guesses may fail.
   */
  private placeIncident(row: IncidentInput): void {
    const change = this.incidentChanges.get(row.account_id) as IncidentChange;
    change.records += 1;
    // The row is its own key: no object per record.
    if (change.newest !== null && compareKeys(row, change.newest) <= 0) {
      // Arrived after a larger key: this record and everything from it may be out of place.
      if (change.disorderFrom === null || compareKeys(row, change.disorderFrom) < 0)
        change.disorderFrom = row;
    } else {
      change.newest = row;
    }
    row.position = change.before + change.records;
  }

  /** Writes every pending record, parents before children. */
  async flush(): Promise<void> {
    const { account, department, location, user, incident } = this.pending;
    await accountRepository.upsertMany(
      this.db,
      account.map((p) => p.row),
      new Date().toISOString(),
    );
    for (const [table, batch] of [
      ['departments', department],
      ['locations', location],
    ] as const) {
      await this.checkOwnership(table, batch);
      await namedResourceRepository.upsertMany(
        this.db,
        table,
        batch.map((p) => p.row),
      );
    }
    await this.checkOwnership('users', user);
    await this.checkEmailsFree(user);
    await userRepository.upsertMany(
      this.db,
      user.map((p) => p.row),
    );
    // The upsert itself refuses to move an incident to another account (one statement instead of
    // a lookup per batch); a short count says that some record was refused, and which is looked up.
    const written = await incidentRepository.upsertMany(
      this.db,
      incident.map((p) => p.row),
    );
    if (written < incident.length) await this.checkOwnership('incidents', incident);

    for (const type of RECORD_TYPES) {
      this.pending[type].length = 0;
      this.pendingIds[type].clear();
    }
    this.size = 0;
  }

  /**
   * An import updates records by id but never moves one to another account. Departments, locations
   * and users are checked before they are written (a user's email check relies on it); incidents
   * after, when the upsert wrote fewer rows than it was given.
   */
  private async checkOwnership(
    table: AccountOwnedTable,
    batch: Pending<{ id: string; account_id: string }>[],
  ): Promise<void> {
    if (batch.length === 0) return;
    const owners = await existingOwners(
      this.db,
      table,
      batch.map((p) => p.row.id),
    );
    for (const { where, row } of batch) {
      const owner = owners.get(row.id);
      if (owner !== undefined && owner !== row.account_id) {
        throw new InputError(
          `${where}: field "account_id": record "${row.id}" already belongs to another account`,
        );
      }
    }
  }

  private async checkEmailsFree(batch: Pending<{ id: string; email: string }>[]): Promise<void> {
    if (batch.length === 0) return;
    const existing = await userRepository.findIdsByEmails(
      this.db,
      batch.map((p) => p.row.email),
    );
    const ownerOf = new Map(existing.map((u) => [u.email.toLowerCase(), u.id]));
    for (const { where, row } of batch) {
      const owner = ownerOf.get(row.email.toLowerCase());
      if (owner !== undefined && owner !== row.id && this.emails.get(row.email.toLowerCase())?.id !== owner) {
        throw new InputError(`${where}: field "email" "${row.email}" is already used by another user`);
      }
    }
  }
}

/**
 * Settles paging positions and counts of every account whose incidents this import touched, and
 * bumps the data version of every account it touched at all, so that no cached response or ETag
 * of the account outlives the import.
 */
async function refreshAccounts(db: Kysely<Database>, batches: Batches): Promise<void> {
  for (const accountId of batches.touchedAccounts) {
    const change = batches.incidentChanges.get(accountId);
    if (change === undefined) {
      await accountRepository.bumpDataVersion(db, accountId);
      continue;
    }
    const after = await incidentRepository.countForAccount(db, accountId);
    // Only inserts (each record a new incident) leave every earlier rank as it was; an update may
    // have moved a row anywhere, and it also left the guessed positions of later records one off.
    const onlyInserts = after - change.before === change.records;
    if (!onlyInserts) await incidentRepository.rerank(db, accountId, null);
    else if (change.disorderFrom !== null)
      await incidentRepository.rerank(db, accountId, change.disorderFrom);
    await accountRepository.recordIncidentChange(db, accountId, after);
  }
}

export async function importFile(db: Kysely<Database>, path: string): Promise<ImportSummary> {
  const format = extname(path).toLowerCase();
  if (format !== '.json' && format !== '.ndjson') {
    throw new InputError(`the file must end in .json or .ndjson (got "${path}")`);
  }
  const file = await stat(path).catch(() => null);
  if (file === null || !file.isFile()) throw new InputError(`cannot read "${path}": no such file`);
  const source = format === '.json' ? readJson(path) : readNdjson(path);
  const now = new Date().toISOString();

  return withBulkWriteCache(db, () =>
    db.transaction().execute(async (trx) => {
      const batches = new Batches(trx);
      for await (const records of source) {
        for (const { where, type, value, extraFields } of records) {
          const added = batches.add(where, validateRecord(type, value, where, now, extraFields));
          if (added !== undefined) await added;
        }
      }
      await batches.flush();
      await refreshAccounts(trx, batches);
      return batches.counts;
    }),
  );
}
