import { on } from 'node:events';
import { MessageChannel } from 'node:worker_threads';
import { stat } from 'node:fs/promises';
import { extname } from 'node:path';
import type { Kysely } from 'kysely';
import { DEFAULT_CHANGES_RETENTION_DAYS } from '../config.ts';
import { accountRepository } from '../db/repositories/accounts.ts';
import {
  type AccountIncidentKey,
  IncidentExistsError,
  incidentRepository,
} from '../db/repositories/incidents.ts';
import { type AccountOwnedTable, existingOwners } from '../db/repositories/ownership.ts';
import { type UserInput, userRepository } from '../db/repositories/users.ts';
import type { Database } from '../db/schema.ts';
import { storeFor } from '../db/store.ts';
import { InputError } from '../errors.ts';
import { startWorker } from '../lib/worker-thread.ts';
import { IncidentWriter, type IncidentSource } from '../services/incident-writer.ts';
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
  /** Places the incidents and settles their positions and block counts (`refreshAccounts`). */
  readonly incidents: IncidentWriter;
  /** The time written with the changes being taken: that of the last batch written. */
  private changedAt = new Date().toISOString();
  /** Records taken so far, of every type. */
  private taken = 0;

  private readonly db: Kysely<Database>;
  private readonly newOnly: boolean;

  /**
   * @param newOnly write the records of the kinds that have `insertNew` with it: the transaction
   * fails (`IncidentExistsError`) at the first of those records whose id is stored
   * @param file what the reading can tell of the whole file, asked for only when needed
   */
  constructor(db: Kysely<Database>, newOnly: boolean, file: IncidentSource) {
    this.db = db;
    this.newOnly = newOnly;
    this.incidents = new IncidentWriter(db, file);
  }

  start(): Promise<void> {
    return this.incidents.start();
  }

  /**
   * Takes one record. Returns a promise only when the record needs the database first (an account
   * seen for the first time, a full batch): most records are taken without a turn of the event loop.
   */
  add(where: string, record: ValidRecord): Promise<void> | undefined {
    if (
      this.pendingIds[record.type].has(record.row.id) ||
      (record.type !== 'account' && !this.lastSeq.has(record.row.account_id)) ||
      (record.type === 'incident' &&
        this.incidents.waits(record.row.account_id, record.deleted ? null : record.row))
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
    if (record.type === 'incident') {
      await this.incidents.prepare(
        record.row.account_id,
        record.deleted ? null : record.row,
        this.taken,
        () => this.pending.incident.map((p) => p.row),
      );
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
    if (record.type === 'incident') this.incidents.place(record.row, this.taken - 1);
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

  /** Writes what is pending, then lets the incident writer finish before positions are settled. */
  async finish(): Promise<void> {
    await this.flush();
    await this.incidents.finish();
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
    this.incidents.batchWritten();
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
    if (type === 'incident') await this.incidents.written(batch.map((p) => p.row.id));
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
    this.incidents.removed(removed.incidents);
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
    const incidentCount = await batches.incidents.settle(accountId);
    const purgedSeq = await incidentRepository.purgeTombstones(db, accountId, purgeBefore);
    await accountRepository.recordChanges(db, accountId, {
      lastSeq: batches.lastSeq.get(accountId) ?? null,
      incidentCount,
      purgedSeq,
    });
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
  const store = storeFor(db);
  const load = (newOnly: boolean) =>
    store.withBulkWriteSettings(db, () =>
      db.transaction().execute(async (trx) => {
        const skipped: SkippedCounts = {};
        const reading = readInWorker(request, skipped);
        const batches = new Batches(trx, newOnly, reading);
        try {
          await batches.start();
          for await (const chunk of reading.chunks) {
            for (const { where, record } of chunk) {
              const added = batches.add(where, record);
              if (added !== undefined) await added;
            }
          }
        } finally {
          await reading.stop();
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
  await store.refreshPlannerStatistics(
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

/** A file read by a worker thread (worker.ts). */
interface WorkerReading extends IncidentSource {
  /**
   * The validated chunks. Each chunk taken is acknowledged so the worker can read further; the
   * worker ends when the reading does, or when the import stops early (a database check failed).
   */
  chunks: AsyncGenerator<PlacedRecord[]>;
  /** Ends the worker, read to the end or not (the import failed before, or while, taking its chunks). */
  stop(): Promise<void>;
}

function readInWorker(request: ReadRequest, skipped: SkippedCounts): WorkerReading {
  const worker = startWorker(
    { source: new URL('./worker.ts', import.meta.url), bundle: 'import-reader.js' },
    { workerData: request, resourceLimits: request.format === '.ndjson' ? NDJSON_WORKER_LIMITS : {} },
  );
  const control = (message: ReadControl) => worker.postMessage(message);
  const cannotRead = (text: string) => new Error(`import: cannot read the file: ${text}`);
  // Heard from the start: a worker's message that finds no listener is lost, and the worker may
  // post its first chunks while the writing thread still waits for the store (`Batches.start`).
  // Rejects if the worker itself fails (an 'error' event).
  const messages = on(worker, 'message') as AsyncIterableIterator<[ReadMessage]>;
  const stop = async () => {
    await messages.return?.();
    await worker.terminate();
  };
  async function* chunks(): AsyncGenerator<PlacedRecord[]> {
    try {
      for await (const [message] of messages) {
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
      await stop();
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
  return { chunks: chunks(), recordsAtMost, incidentKeys, stop };
}
