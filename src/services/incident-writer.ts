import type { Kysely } from 'kysely';
import {
  type AccountIncidentKey,
  type IncidentInput,
  type IncidentKey,
  incidentRepository,
  POSITION_BLOCK,
  type RankedKey,
  type RemovedIncident,
} from '../db/repositories/incidents.ts';
import type { Database } from '../db/schema.ts';

/**
 * The one keeper of incidents' paging positions and block counts (docs/architecture.md,
 * "Paging"). A transaction that writes incidents goes through an `IncidentWriter`: it places each
 * incident as it is taken (`place`, before the row is written), hears of every batch written
 * (`written`, `batchWritten`) and every incident removed (`removed`), and, before the transaction
 * commits, settles each account's positions and block counts (`finish`, then `settle`). The
 * import (src/import/import.ts) is the writer of incidents today; another one would drive it the
 * same way.
 */

/** What the file being written can tell of itself when asked, beside its reading. */
export interface IncidentSource {
  /** An upper bound of the file's records. */
  recordsAtMost(): Promise<number>;
  /** The keys of the file's incident records that write an incident, in file order. */
  incidentKeys(): AsyncGenerator<AccountIncidentKey[]>;
}

/**
 * Ranked keys read from the store at a time. Any size is right (each rank is taken in turn); this
 * one holds about as many keys as an import writes incidents per statement.
 */
const RANKS_PER_READ = 2000;

interface IncidentChange {
  /** Incidents of the account before this import. */
  before: number;
  /** The highest position before this import: new incidents are placed after it. */
  topBefore: number;
  /** Incident records of the account in this import to write (inserts and updates). */
  records: number;
  /**
   * How the account's incidents are placed (`place`): `up` from just above `topBefore` in
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

export class IncidentWriter {
  /** Per account whose incidents this writer writes: what `settle` needs to know. */
  private readonly changes = new Map<string, IncidentChange>();
  /** Whether a deleted incident may be written again: then its tombstone must go. */
  private tombstonesExist = false;
  /** The file's records at most, once asked for (`place`). */
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
  private readonly file: IncidentSource;

  constructor(db: Kysely<Database>, file: IncidentSource) {
    this.db = db;
    this.file = file;
    this.rankable = incidentRepository.ranksBeforeWriting(db);
  }

  async start(): Promise<void> {
    this.tombstonesExist = await incidentRepository.anyTombstone(this.db);
  }

  /**
   * Whether taking an incident record of `accountId` needs `prepare` first: the account's first
   * one, or a `row` to write whose place needs the store or the reading (null: a deletion).
   */
  waits(accountId: string, row: IncidentInput | null): boolean {
    return !this.changes.has(accountId) || (row !== null && this.placementWaits(row));
  }

  /**
   * What taking an incident record of `accountId` needs first: the account's incidents as they
   * are, and for a `row` to write, the file's ranks or its record count. `recordsBefore`: the
   * records taken before this one; `pending`: the incidents taken and not yet written.
   */
  async prepare(
    accountId: string,
    row: IncidentInput | null,
    recordsBefore: number,
    pending: () => IncidentInput[],
  ): Promise<void> {
    await this.startAccount(accountId);
    if (row === null) return;
    if (this.wantsRanks(row)) {
      await this.rankFile(pending());
    } else if (this.needsRecordCount(row)) {
      this.recordsAtMost = await this.file.recordsAtMost();
      // Newest first from here: the paging index may be cheaper to build again at the end.
      this.positionIndex = await incidentRepository.dropPositionIndexBefore(
        this.db,
        this.recordsAtMost - recordsBefore,
      );
    }
    if (this.ranks?.spent) await this.ranks.readMore();
  }

  private async startAccount(accountId: string): Promise<void> {
    if (this.changes.has(accountId)) return;
    const before = await incidentRepository.countForAccount(this.db, accountId);
    const newest = await incidentRepository.newest(this.db, accountId);
    const storedNewest = newest === null ? null : { created_at: newest.created_at, id: newest.id };
    this.changes.set(accountId, {
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

  /** Whether placing `row` needs the store or the reading first. */
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
    const change = this.changes.get(row.account_id);
    if (change === undefined || change.records === 0 || this.turnsDown(change, row)) return false;
    if (change.storedNewest !== null && compareKeys(row, change.storedNewest) <= 0) return false;
    return change.direction === 'down'
      ? compareKeys(row, change.lowest as IncidentKey) >= 0
      : compareKeys(row, change.newest as IncidentKey) <= 0;
  }

  /**
   * Ranks the incidents of the whole file, read a second time for their keys alone, and places
   * the ones taken so far (all pending: none is written) at their ranks; every incident after them
   * takes its rank as it comes (`place`), so none has to be placed again at the end.
   */
  private async rankFile(pending: IncidentInput[]): Promise<void> {
    this.rankable = false;
    const total = await incidentRepository.rankKeys(this.db, this.file.incidentKeys());
    const ranks = new FileRanks(this.db, total);
    for (const change of this.changes.values()) change.direction = 'ranked';
    for (const row of pending) {
      if (ranks.spent) await ranks.readMore();
      row.position = (this.changes.get(row.account_id) as IncidentChange).topBefore + ranks.take(row);
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
    const change = this.changes.get(row.account_id);
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
  place(row: IncidentInput, recordsBefore: number): void {
    const change = this.changes.get(row.account_id) as IncidentChange;
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
      change.firstAt = recordsBefore;
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
   * A batch of incidents was written (`ids`): from now on the file is too late to rank, and an
   * incident deleted earlier and written again loses its tombstone.
   */
  async written(ids: string[]): Promise<void> {
    this.rankable = false;
    if (this.tombstonesExist) await incidentRepository.removeTombstones(this.db, ids);
  }

  /** Every pending record was written: an account's first incident keeps its place from now on. */
  batchWritten(): void {
    for (const change of this.changes.values()) change.first = null;
  }

  /** Incidents were taken out of the view, each leaving a hole at the position it held. */
  removed(incidents: RemovedIncident[]): void {
    for (const { account_id: accountId, position } of incidents) {
      const change = this.changes.get(accountId) as IncidentChange;
      change.removed += 1;
      change.holedBlocks.add(Math.floor((position - 1) / POSITION_BLOCK));
      this.tombstonesExist = true;
    }
  }

  /**
   * Once everything is written: builds the paging index again if it was dropped, before positions
   * are settled; ranks that were not all the file's mark the accounts they placed for re-ranking.
   */
  async finish(): Promise<void> {
    if (this.positionIndex !== null) await incidentRepository.buildPositionIndex(this.db, this.positionIndex);
    this.positionIndex = null;
    if (this.ranks === null) return;
    await incidentRepository.dropRankedKeys(this.db);
    if (this.ranks.complete) return;
    for (const change of this.changes.values()) change.misranked = change.direction === 'ranked';
  }

  /**
   * Settles the positions and block counts of `accountId` after `finish`; returns its incident
   * count, or undefined when this writer wrote none of its incidents.
   */
  async settle(accountId: string): Promise<number | undefined> {
    const change = this.changes.get(accountId);
    if (change === undefined) return undefined;
    const incidentCount = await incidentRepository.countForAccount(this.db, accountId);
    await settlePositions(this.db, accountId, change, incidentCount);
    return incidentCount;
  }
}

/**
 * Positions after the writes, as cheaply as they can be made right (docs/architecture.md):
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
