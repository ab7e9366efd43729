import { on } from 'node:events';
import { MessageChannel } from 'node:worker_threads';
import { stat } from 'node:fs/promises';
import { extname } from 'node:path';
import type { Kysely } from 'kysely';
import { DEFAULT_CHANGES_RETENTION_DAYS } from '../config.ts';
import { refreshPlannerStatistics, withBulkWriteSettings } from '../db/database.ts';
import { accountRepository } from '../db/repositories/accounts.ts';
import {
  type AccountIncidentKey,
  type IncidentInput,
  IncidentExistsError,
  type IncidentKey,
  incidentRepository,
  POSITION_BLOCK,
  type RankedKey,
} from '../db/repositories/incidents.ts';
import { type AccountOwnedTable, existingOwners } from '../db/repositories/ownership.ts';
import { type UserInput, userRepository } from '../db/repositories/users.ts';
import type { Database } from '../db/schema.ts';
import { InputError } from '../errors.ts';
import { startWorker } from '../lib/worker-thread.ts';
import { inSpan } from '../telemetry/tracing.ts';
import { RECORD_WRITERS, type RecordWriter, type Stamped } from './records.ts';
import {
  perRecordType,
  RECORD_FORMS,
  RECORD_TYPES,
  type RecordRef,
  type RecordType,
  type RowOf,
  type ValidRecord,
} from './validation.ts';
import {
  type KeysMessage,
  type PlacedRecord,
  type ReadControl,
  type ReadMessage,
  type ReadRequest,
  type SkippedCounts,
  unpackChunk,
  unpackKeys,
} from './source.ts';

/**
 * `safety-api import FILE` (src/cli/import.ts runs this in a thread with a bounded heap): loads a
 * .json or .ndjson file in one transaction. A worker thread reads, parses and validates the file
 * (source.ts) while this thread writes the records it has already validated in batches, so the two
 * halves of the work share the machine's cores and an NDJSON file of any size streams through in
 * constant memory. The first bad record, whichever
 * side finds it, rolls everything back and is named in the error.
 */

/**
 * Records written per type, records deleted per type (only types with deletions), and the lines of
 * an `accounts export` skipped per type (`EXPORT_ONLY_TYPES`; absent when none was).
 */
export type ImportSummary = Record<RecordType, number> & {
  deleted: Partial<Record<RecordType, number>>;
  skipped?: SkippedCounts;
};

/**
 * Records written per statement. Larger batches amortize the per-statement work (2,000 took about
 * a tenth less CPU than 1,000 here); 2,000 incidents bind 30,000 parameters on SQLite, below its
 * limit (32,766). PostgreSQL takes a batch as one COPY or one JSON parameter (`incidentRepository`).
 */
const BATCH_SIZE = 2000;

/** Records of one type from which an import refreshes the planner's statistics of its table. */
const STATISTICS_AFTER_RECORDS = 1000;

interface IncidentChange {
  /** Incidents of the account before this import. */
  before: number;
  /** The highest position before this import: new incidents are placed after it. */
  topBefore: number;
  /** Incident records of the account in this import to write (inserts and updates). */
  records: number;
  /**
   * How the account's incidents are placed (`placeIncident`): `up` from just above `topBefore` in
   * the order they arrive, for a file newest first `down` from `topBefore + room`, or, for a file
   * out of order, `ranked`: just above `topBefore` at their ranks among the file's incidents.
   */
  direction: 'up' | 'down' | 'ranked';
  /** The account's first incident record while its batch is pending: the second one may still move it. */
  first: IncidentInput | null;
  /** Records taken before the account's first incident record. */
  firstAt: number;
  /** Down: the records the rest of the file can hold at most, from the account's first incident on. */
  room: number;
  /** The largest key stored before this import. */
  storedNewest: IncidentKey | null;
  /** Down: the last key placed, the smallest while the records come in order. */
  lowest: IncidentKey | null;
  /** Incidents this import removed. */
  removed: number;
  /** The position blocks deletions left holes in. */
  holedBlocks: Set<number>;
  /** Largest (created_at, id) seen so far, in the store or in this import. */
  newest: IncidentKey | null;
  /** Smallest key that arrived after a larger one; `null` while the records came in order. */
  disorderFrom: IncidentKey | null;
  /** Ranked with ranks that turned out not to be the file's (`FileRanks.complete`): re-ranked whole. */
  misranked: boolean;
}

/** Paging order: (created_at, id) ascending, as `rerank` counts it. */
function compareKeys(a: IncidentKey, b: IncidentKey): number {
  if (a.created_at !== b.created_at) return a.created_at < b.created_at ? -1 : 1;
  return a.id === b.id ? 0 : a.id < b.id ? -1 : 1;
}

/** Ranked keys read from the store at a time: a batch's worth. */
const RANKS_PER_READ = BATCH_SIZE;

/**
 * The ranks of a file's incidents in their accounts (`incidentRepository.rankKeys`), taken in file
 * order as its incident records are, a read at a time. Each record taken is checked to have the
 * key ranked at its place, so that ranks that are not the file's (a key read from the bytes that
 * parsing reads otherwise, a file changed between its two readings) are found out, and the
 * positions they gave made right at the end.
 */
class FileRanks {
  private readonly db: Kysely<Database>;
  private readonly total: number;
  private page: RankedKey[] = [];
  private next = 0;
  private read = 0;
  private matched = true;

  constructor(db: Kysely<Database>, total: number) {
    this.db = db;
    this.total = total;
  }

  /** Whether the ranks read so far are taken and more are stored: `readMore` before `take`. */
  get spent(): boolean {
    return this.next === this.page.length && this.read < this.total;
  }

  async readMore(): Promise<void> {
    this.page = await incidentRepository.rankedKeys(this.db, RANKS_PER_READ);
    this.next = 0;
    this.read += this.page.length;
  }

  /** The rank of the next incident record, `row`, which must be the one whose key was ranked there. */
  take(row: AccountIncidentKey): number {
    const ranked = this.page[this.next];
    this.next += 1;
    if (
      ranked === undefined ||
      ranked.id !== row.id ||
      ranked.created_at !== row.created_at ||
      ranked.account_id !== row.account_id
    ) {
      this.matched = false;
      return 0;
    }
    return ranked.rank;
  }

  /** Whether every rank was taken, each by the incident it was for. */
  get complete(): boolean {
    return this.matched && this.next === this.page.length && this.read === this.total;
  }
}

interface Pending<Row> {
  where: string;
  row: Stamped<Row>;
}

/** Holds the validated records of one transaction until a batch is written. */
class Batches {
  readonly counts: ImportSummary = { ...perRecordType(() => 0), deleted: {} };
  private readonly pending = perRecordType(() => []) as { [T in RecordType]: Pending<RowOf<T>>[] };
  private readonly pendingDeletions = perRecordType(() => [] as Pending<RecordRef>[]);
  private readonly pendingIds = perRecordType(() => new Set<string>());
  private size = 0;
  /** Accounts known to exist, in the store or earlier in this import. */
  private readonly knownAccounts = new Set<string>();
  /**
   * The last feed seq given out per account whose records this import writes, starting from its
   * `data_version`, read with the account row locked so that concurrent writers take turns.
   */
  readonly lastSeq = new Map<string, number>();
  /** Email (lower case) of every user in this import, with its id and place. */
  private readonly emails = new Map<string, { id: string; where: string }>();
  /** Every account a record of this import names: its public data (and so its data version) changes. */
  readonly touchedAccounts = new Set<string>();
  /** Per account whose incidents this import writes: what `refreshAccounts` needs to know. */
  readonly incidentChanges = new Map<string, IncidentChange>();
  /** Whether a deleted incident may be imported again: then its tombstone must go. */
  private tombstonesExist = false;
  /** The time written with the changes being taken: that of the last batch written. */
  private changedAt = new Date().toISOString();
  /** Records taken so far, of every type. */
  private taken = 0;
  /** The file's records at most, once asked for (`placeIncident`). */
  private recordsAtMost: number | null = null;
  /** The paging index's statement while it is dropped (`finish` builds it again). */
  private positionIndex: string | null = null;
  /**
   * Whether the file may still be ranked before it is written (`rankFile`): until an incident is
   * written or the file is ranked.
   */
  private rankable: boolean;
  /** The ranks of the file's incidents, once it turned out of order while none was written. */
  private ranks: FileRanks | null = null;

  private readonly db: Kysely<Database>;
  private readonly newOnly: boolean;
  private readonly file: FileFacts;

  /**
   * @param newOnly write the records of the kinds that have `insertNew` with it: the transaction
   * fails (`IncidentExistsError`) at the first of those records whose id is stored
   * @param file what the reading can tell of the whole file, asked for only when needed
   */
  constructor(db: Kysely<Database>, newOnly: boolean, file: FileFacts) {
    this.db = db;
    this.newOnly = newOnly;
    this.file = file;
    this.rankable = incidentRepository.ranksBeforeWriting(db);
  }

  async start(): Promise<void> {
    this.tombstonesExist = await incidentRepository.anyTombstone(this.db);
  }

  /**
   * Takes one record. Returns a promise only when the record needs the database first (an account
   * seen for the first time, a full batch): most records are taken without a turn of the event loop.
   */
  add(where: string, record: ValidRecord): Promise<void> | undefined {
    if (
      this.pendingIds[record.type].has(record.row.id) ||
      (record.type !== 'account' && !this.lastSeq.has(record.row.account_id)) ||
      (record.type === 'incident' && !this.incidentChanges.has(record.row.account_id)) ||
      (record.type === 'incident' && !record.deleted && this.placementWaits(record.row))
    ) {
      return this.addAfterLookups(where, record);
    }
    this.take(where, record);
    return this.size >= BATCH_SIZE ? this.flush() : undefined;
  }

  private async addAfterLookups(where: string, record: ValidRecord): Promise<void> {
    // The same id twice in one batch: write the first before taking the second (last one wins).
    if (this.pendingIds[record.type].has(record.row.id)) await this.flush();
    if (record.type !== 'account') {
      await this.requireAccount(where, record.row.account_id);
      await this.startAccountChange(record.row.account_id);
    }
    if (record.type === 'incident') await this.startIncidentChange(record.row.account_id);
    if (record.type === 'incident' && !record.deleted) {
      if (this.wantsRanks(record.row)) {
        await this.rankFile();
      } else if (this.needsRecordCount(record.row)) {
        this.recordsAtMost = await this.file.recordsAtMost();
        // Newest first from here: the paging index may be cheaper to build again at the end.
        this.positionIndex = await incidentRepository.dropPositionIndexBefore(
          this.db,
          this.recordsAtMost - this.taken,
        );
      }
      if (this.ranks?.spent) await this.ranks.readMore();
    }
    this.take(where, record);
    if (this.size >= BATCH_SIZE) await this.flush();
  }

  private take(where: string, record: ValidRecord): void {
    this.taken += 1;
    this.pendingIds[record.type].add(record.row.id);
    this.size += 1;
    if (record.type === 'account') {
      this.knownAccounts.add(record.row.id);
      this.touchedAccounts.add(record.row.id);
      // Accounts are not in the feed: the stamp is only the shape every pending row has.
      this.pending.account.push({ where, row: this.stamp(record.row, 0) });
      this.counts.account += 1;
      return;
    }
    const accountId = record.row.account_id;
    this.touchedAccounts.add(accountId);
    const seq = (this.lastSeq.get(accountId) as number) + 1;
    this.lastSeq.set(accountId, seq);
    if (record.deleted) {
      this.pendingDeletions[record.type].push({ where, row: this.stamp(record.row, seq) });
      return;
    }
    if (record.type === 'user') this.claimEmail(where, record.row.id, record.row.email);
    if (record.type === 'incident') this.placeIncident(record.row);
    (this.pending[record.type] as Pending<unknown>[]).push({ where, row: this.stamp(record.row, seq) });
    this.counts[record.type] += 1;
  }

  /** The row, stamped in place (no object per record) with its change's place in the feed. */
  private stamp<Row extends object>(row: Row, seq: number): Stamped<Row> {
    return Object.assign(row, { change_seq: seq, changed_at: this.changedAt, created_seq: seq });
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

  private async startAccountChange(accountId: string): Promise<void> {
    if (this.lastSeq.has(accountId)) return;
    // An account this import creates is not stored yet: its feed starts at 0.
    this.lastSeq.set(accountId, (await accountRepository.lockForChanges(this.db, accountId)) ?? 0);
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
    const newest = await incidentRepository.newest(this.db, accountId);
    const storedNewest = newest === null ? null : { created_at: newest.created_at, id: newest.id };
    this.incidentChanges.set(accountId, {
      before,
      topBefore: newest?.position ?? 0,
      records: 0,
      direction: 'up',
      first: null,
      firstAt: 0,
      room: 0,
      storedNewest,
      lowest: null,
      removed: 0,
      holedBlocks: new Set(),
      newest: storedNewest,
      disorderFrom: null,
      misranked: false,
    });
  }

  /** Whether placing incident `row` needs the database or the reading first. */
  private placementWaits(row: IncidentInput): boolean {
    return this.ranks === null ? this.wantsRanks(row) || this.needsRecordCount(row) : this.ranks.spent;
  }

  /**
   * Whether `row` breaks the order of its account's incidents in this file, none of which is
   * written yet, while each is newer than the account's stored ones: then ranking the whole file
   * first (`rankFile`) writes each incident once, at its place. A record that turns the account
   * newest first does not: that order is placed as it comes. One older than a stored incident
   * makes the account's older ranks change: it is re-ranked at the end whatever the file's order.
   */
  private wantsRanks(row: IncidentInput): boolean {
    if (!this.rankable) return false;
    const change = this.incidentChanges.get(row.account_id);
    if (change === undefined || change.records === 0 || this.turnsDown(change, row)) return false;
    if (change.storedNewest !== null && compareKeys(row, change.storedNewest) <= 0) return false;
    return change.direction === 'down'
      ? compareKeys(row, change.lowest as IncidentKey) >= 0
      : compareKeys(row, change.newest as IncidentKey) <= 0;
  }

  /**
   * Ranks the incidents of the whole file, read a second time for their keys alone, and places
   * the ones taken so far (all pending: none is written) at their ranks; every incident after them
   * takes its rank as it comes (`placeIncident`), so none has to be placed again at the end.
   */
  private async rankFile(): Promise<void> {
    this.rankable = false;
    const total = await incidentRepository.rankKeys(this.db, this.file.incidentKeys());
    const ranks = new FileRanks(this.db, total);
    for (const change of this.incidentChanges.values()) change.direction = 'ranked';
    for (const { row } of this.pending.incident as Pending<IncidentInput>[]) {
      if (ranks.spent) await ranks.readMore();
      row.position = (this.incidentChanges.get(row.account_id) as IncidentChange).topBefore + ranks.take(row);
    }
    this.ranks = ranks;
  }

  /**
   * Whether `row` is the second incident of its account, smaller than the first, still pending and
   * in place, so that the account may be placed downwards, and the file's records are not yet
   * counted: the count is asked for only by a file newest first.
   */
  private needsRecordCount(row: IncidentInput): boolean {
    if (this.recordsAtMost !== null || this.ranks !== null) return false;
    const change = this.incidentChanges.get(row.account_id);
    return change !== undefined && this.turnsDown(change, row);
  }

  private turnsDown(change: IncidentChange, row: IncidentInput): boolean {
    return (
      change.records === 1 &&
      change.first !== null &&
      change.disorderFrom === null &&
      compareKeys(row, change.first) < 0 &&
      (change.storedNewest === null || compareKeys(row, change.storedNewest) > 0)
    );
  }

  /**
   * Gives an incident the position it would have if the file continued the account's order. That
   * guess is the true place of every record that arrives in order, so a file oldest first or
   * newest first needs no re-ranking at all; `disorderFrom` marks where guesses may fail.
   * - Up (oldest first): just after the account's highest position, in the order of the records.
   * - Down (newest first: the second incident is smaller than the first): from the highest
   *   position the rest of the file could fill, `topBefore + room`, downwards. The positions left
   *   empty below the last one are holes in their blocks, counted like a deletion's
   *   (`settlePositions`): none when the account's incidents end the file.
   */
  private placeIncident(row: IncidentInput): void {
    const change = this.incidentChanges.get(row.account_id) as IncidentChange;
    if (this.ranks !== null) {
      change.direction = 'ranked';
      change.records += 1;
      row.position = change.topBefore + this.ranks.take(row);
      if (
        change.storedNewest !== null &&
        compareKeys(row, change.storedNewest) <= 0 &&
        (change.disorderFrom === null || compareKeys(row, change.disorderFrom) < 0)
      )
        change.disorderFrom = row;
      return;
    }
    if (change.records === 0) {
      change.first = row;
      change.firstAt = this.taken - 1;
    } else if (this.recordsAtMost !== null && this.turnsDown(change, row)) {
      const first = change.first as IncidentInput;
      change.direction = 'down';
      change.room = this.recordsAtMost - change.firstAt;
      change.lowest = first;
      first.position = change.topBefore + change.room;
    }
    change.records += 1;
    if (change.direction === 'down') {
      // In place while each record is smaller than the one before it and larger than any stored.
      // The row is its own key: no object per record.
      if (
        change.records > change.room ||
        compareKeys(row, change.lowest as IncidentKey) >= 0 ||
        (change.storedNewest !== null && compareKeys(row, change.storedNewest) <= 0)
      )
        change.disorderFrom ??= row;
      change.lowest = row;
      row.position = change.topBefore + change.room - change.records + 1;
      return;
    }
    if (change.newest !== null && compareKeys(row, change.newest) <= 0) {
      // Arrived after a larger key: this record and everything from it may be out of place.
      if (change.disorderFrom === null || compareKeys(row, change.disorderFrom) < 0)
        change.disorderFrom = row;
    } else {
      change.newest = row;
    }
    row.position = change.topBefore + change.records;
  }

  /**
   * Writes what is pending and builds the paging index again if it was dropped, before positions
   * are settled; ranks that were not all the file's mark the accounts they placed for re-ranking.
   */
  async finish(): Promise<void> {
    await this.flush();
    if (this.positionIndex !== null) await incidentRepository.buildPositionIndex(this.db, this.positionIndex);
    this.positionIndex = null;
    if (this.ranks === null) return;
    await incidentRepository.dropRankedKeys(this.db);
    if (this.ranks.complete) return;
    for (const change of this.incidentChanges.values()) change.misranked = change.direction === 'ranked';
  }

  // Every pending record, in RECORD_FORMS' order: parents before children.
  /** Writes every pending record (a span per batch, with tracing on). */
  flush(): Promise<void> {
    return inSpan('import.batch', { attributes: { 'import.records': this.size } }, () => this.writeBatch());
  }

  private async writeBatch(): Promise<void> {
    const now = new Date().toISOString();
    for (const type of RECORD_TYPES) {
      await this.write(type, now);
      await this.remove(type);
      this.pending[type].length = 0;
      this.pendingDeletions[type].length = 0;
      this.pendingIds[type].clear();
    }
    // Written: an account's first incident keeps its place from now on.
    for (const change of this.incidentChanges.values()) change.first = null;
    this.size = 0;
    this.changedAt = now;
  }

  private async write<T extends RecordType>(type: T, now: string): Promise<void> {
    const batch = this.pending[type] as Pending<RowOf<T>>[];
    if (batch.length === 0) return;
    const kind = RECORD_WRITERS[type] as RecordWriter<RowOf<T>>;
    const owned = batch as Pending<RecordRef>[];
    if (kind.ownedIn !== null && !kind.upsertRefusesMoves) await this.checkOwnership(kind.ownedIn, owned);
    if (type === 'user') await this.checkEmailsFree(batch as Pending<UserInput>[]);
    const rows = batch.map((p) => p.row);
    if (this.newOnly && kind.insertNew !== undefined) {
      await kind.insertNew(this.db, rows);
    } else {
      const written = await kind.upsert(this.db, rows, now);
      // A short count says that the upsert refused some record; which one is looked up.
      if (kind.ownedIn !== null && written < batch.length) await this.checkOwnership(kind.ownedIn, owned);
    }
    // Written where it was placed: from now on the file is too late to rank.
    if (type === 'incident') this.rankable = false;
    if (type === 'incident' && this.tombstonesExist) {
      await incidentRepository.removeTombstones(
        this.db,
        batch.map((p) => p.row.id),
      );
    }
  }

  /** Takes the pending deletions of `type` out of the public view. */
  private async remove(type: RecordType): Promise<void> {
    const batch = this.pendingDeletions[type];
    if (batch.length === 0) return;
    const kind = RECORD_WRITERS[type] as RecordWriter<{ id: string }>;
    if (kind.remove === null || kind.ownedIn === null) throw new Error(`${type} records cannot be deleted`);
    await this.checkOwnership(kind.ownedIn, batch);
    const removed = await kind.remove(
      this.db,
      batch.map((p) => p.row),
    );
    // What was really taken out: deleting what is not there does nothing, and says so.
    this.counts.deleted[type] = (this.counts.deleted[type] ?? 0) + removed.count;
    for (const { account_id: accountId, position } of removed.incidents) {
      const change = this.incidentChanges.get(accountId) as IncidentChange;
      change.removed += 1;
      change.holedBlocks.add(Math.floor((position - 1) / POSITION_BLOCK));
      this.tombstonesExist = true;
    }
  }

  /**
   * An import updates records by id but never moves one to another account: checked before a
   * batch is written, or after, when its upsert refuses moves itself and wrote fewer rows.
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
 * Settles paging positions and counts of every account whose incidents this import touched, purges
 * tombstones past retention, and moves each touched account's data version (the feed head) to the
 * last seq this import gave out, so that no cached response or ETag of the account outlives it.
 */
async function refreshAccounts(db: Kysely<Database>, batches: Batches, retentionDays: number): Promise<void> {
  const purgeBefore = new Date(Date.now() - retentionDays * 86_400_000).toISOString();
  for (const accountId of batches.touchedAccounts) {
    const change = batches.incidentChanges.get(accountId);
    let incidentCount: number | undefined;
    if (change !== undefined) {
      incidentCount = await incidentRepository.countForAccount(db, accountId);
      await settlePositions(db, accountId, change, incidentCount);
    }
    const purgedSeq = await incidentRepository.purgeTombstones(db, accountId, purgeBefore);
    await accountRepository.recordChanges(db, accountId, {
      lastSeq: batches.lastSeq.get(accountId) ?? null,
      incidentCount,
      purgedSeq,
    });
  }
}

/**
 * Positions after the import's writes, as cheaply as they can be made right (docs/architecture.md):
 * - only new incidents, in order (oldest first, or newest first placed down) or ranked before they
 *   were written, no holes anywhere: nothing to do, every guess was right;
 * - only new incidents placed up with some out of order, no holes: re-rank from the first out of
 *   place;
 * - only new incidents in order, and deletions, older holes or positions left empty below those
 *   placed down: count again the blocks that lost rows, that new incidents filled or left empty;
 * - anything else (an update may move an incident anywhere): re-rank the account.
 */
async function settlePositions(
  db: Kysely<Database>,
  accountId: string,
  change: IncidentChange,
  incidentCount: number,
): Promise<void> {
  const onlyInserts = incidentCount === change.before + change.records - change.removed;
  const holes = await incidentRepository.listHoleBlocks(db, accountId);
  const whole = holes.length > 0 || change.removed > 0 || change.direction === 'down';
  if (!onlyInserts || change.misranked || (change.disorderFrom !== null && whole)) {
    await incidentRepository.rerank(db, accountId, null);
  } else if (change.disorderFrom !== null) {
    await incidentRepository.rerank(db, accountId, change.disorderFrom);
  } else {
    // New incidents went after the highest position, into its block and beyond.
    const firstNewBlock = Math.floor(change.topBefore / POSITION_BLOCK);
    const recount = new Set(change.holedBlocks);
    for (const { block } of holes) if (block >= firstNewBlock) recount.add(block);
    // Placed down: the positions from just above the highest before to just below the lowest
    // placed are empty, and so are holes in their blocks.
    const lowest = change.topBefore + change.room - change.records + 1;
    if (change.direction === 'down' && lowest > change.topBefore + 1) {
      for (let block = firstNewBlock; block <= Math.floor((lowest - 2) / POSITION_BLOCK); block += 1)
        recount.add(block);
    }
    if (recount.size > 0) await incidentRepository.recountBlocks(db, accountId, recount);
  }
}

export interface ImportOptions {
  /** CHANGES_RETENTION_DAYS: tombstones older than this are purged by the import. */
  retentionDays?: number;
}

export async function importFile(
  db: Kysely<Database>,
  path: string,
  { retentionDays = DEFAULT_CHANGES_RETENTION_DAYS }: ImportOptions = {},
): Promise<ImportSummary> {
  const format = extname(path).toLowerCase();
  if (format !== '.json' && format !== '.ndjson') {
    throw new InputError(`the file must end in .json or .ndjson (got "${path}")`);
  }
  const file = await stat(path).catch(() => null);
  if (file === null || !file.isFile()) throw new InputError(`cannot read "${path}": no such file`);
  const request: ReadRequest = { path, format, now: new Date().toISOString() };
  const load = (newOnly: boolean) =>
    withBulkWriteSettings(db, () =>
      db.transaction().execute(async (trx) => {
        const skipped: SkippedCounts = {};
        const reading = readInWorker(request, skipped);
        const batches = new Batches(trx, newOnly, reading);
        await batches.start();
        for await (const chunk of reading.chunks) {
          for (const { where, record } of chunk) {
            const added = batches.add(where, record);
            if (added !== undefined) await added;
          }
        }
        await batches.finish();
        await refreshAccounts(trx, batches, retentionDays);
        return Object.keys(skipped).length === 0 ? batches.counts : { ...batches.counts, skipped };
      }),
    );
  // Where adding new incidents costs less than upserting them (PostgreSQL), the file is first
  // taken to hold only new ones, as a first load or an append does. The first incident already
  // stored rolls that attempt back, and the file is read again to upsert: a re-import pays one
  // batch for the try, a file of new incidents followed by updates pays for the part before.
  const summary = await inSpan(
    'import',
    { root: true, attributes: { 'import.format': format } },
    async () =>
      (incidentRepository.insertsNewFaster(db)
        ? await load(true).catch((error: unknown) => {
            if (error instanceof IncidentExistsError) return null;
            throw error;
          })
        : null) ?? (await load(false)),
  );
  // A bulk load leaves the planner without statistics until autovacuum comes by.
  const bulk = RECORD_TYPES.filter(
    (type) => summary[type] + (summary.deleted[type] ?? 0) >= STATISTICS_AFTER_RECORDS,
  );
  await refreshPlannerStatistics(
    db,
    bulk.map((type) => RECORD_FORMS[type].plural as keyof Database),
  );
  return summary;
}

/**
 * The reading worker's heap when it reads NDJSON: it holds one read's worth of records whatever
 * the file's size. Left to itself, V8 grows a busy thread's young generation to 128 MiB and lets
 * its old generation fill with promoted garbage before it collects. An old generation of 24 MB,
 * close to what the thread keeps alive, made it collect far more often: 48 MB took about an eighth
 * less CPU for a million incidents, for 2–5 MB more peak RSS (docs/performance.md).
 * A .json file is parsed whole, so its worker has no bound but the machine's.
 */
const NDJSON_WORKER_LIMITS = { maxYoungGenerationSizeMb: 8, maxOldGenerationSizeMb: 48 };

/** What the reading can tell of the whole file when asked, beside its reading. */
interface FileFacts {
  /** An upper bound of the file's records, counted by the worker. */
  recordsAtMost(): Promise<number>;
  /** The keys of the file's incident records that write an incident, in file order (`incidentKeys`). */
  incidentKeys(): AsyncGenerator<AccountIncidentKey[]>;
}

/** A file read by a worker thread (worker.ts). */
interface WorkerReading extends FileFacts {
  /**
   * The validated chunks. Each chunk taken is acknowledged so the worker can read further; the
   * worker ends when the reading does, or when the import stops early (a database check failed).
   */
  chunks: AsyncGenerator<PlacedRecord[]>;
}

function readInWorker(request: ReadRequest, skipped: SkippedCounts): WorkerReading {
  const worker = startWorker(
    { source: new URL('./worker.ts', import.meta.url), bundle: 'import-reader.js' },
    { workerData: request, resourceLimits: request.format === '.ndjson' ? NDJSON_WORKER_LIMITS : {} },
  );
  const control = (message: ReadControl) => worker.postMessage(message);
  const cannotRead = (text: string) => new Error(`import: cannot read the file: ${text}`);
  async function* chunks(): AsyncGenerator<PlacedRecord[]> {
    try {
      // Rejects if the worker itself fails (an 'error' event).
      for await (const [message] of on(worker, 'message') as AsyncIterable<[ReadMessage]>) {
        if ('recordsAtMost' in message) continue;
        if ('done' in message) {
          Object.assign(skipped, message.skipped);
          return;
        }
        if ('failure' in message) {
          const { message: text, input } = message.failure;
          throw input ? new InputError(text) : cannotRead(text);
        }
        control('taken');
        yield unpackChunk(message.chunk);
      }
    } finally {
      await worker.terminate();
    }
  }
  // Heard as it comes, not in turn with the chunks: the writing thread waits for it mid-chunk.
  const recordsAtMost = () =>
    new Promise<number>((resolve, reject) => {
      const heard = (message: ReadMessage) => {
        if ('recordsAtMost' in message) resolve(message.recordsAtMost);
        else if ('failure' in message && !message.failure.input) reject(cannotRead(message.failure.message));
        else return;
        worker.off('message', heard).off('error', reject);
      };
      worker.on('message', heard).once('error', reject);
      control('count');
    });
  // On a port of their own, so that the keys are never queued among the chunks.
  async function* incidentKeys(): AsyncGenerator<AccountIncidentKey[]> {
    const { port1, port2 } = new MessageChannel();
    worker.postMessage({ keys: port2 } satisfies ReadControl, [port2]);
    try {
      // A worker that stops closes the port, which ends the messages.
      for await (const [message] of on(port1, 'message', { close: ['close'] }) as AsyncIterable<
        [KeysMessage]
      >) {
        if ('done' in message) return;
        if ('failure' in message) throw cannotRead(message.failure);
        port1.postMessage('taken');
        yield unpackKeys(message.keys);
      }
      throw cannotRead('the reading stopped');
    } finally {
      port1.close();
    }
  }
  return { chunks: chunks(), recordsAtMost, incidentKeys };
}
