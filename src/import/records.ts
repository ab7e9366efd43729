import type { Kysely } from 'kysely';
import { accountRepository } from '../db/repositories/accounts.ts';
import { type ChangeStamp, deactivateMany } from '../db/repositories/change-stamp.ts';
import { incidentRepository, type RemovedIncident } from '../db/repositories/incidents.ts';
import { namedResourceRepository } from '../db/repositories/named-resources.ts';
import type { AccountOwnedTable } from '../db/repositories/ownership.ts';
import { userRepository } from '../db/repositories/users.ts';
import { oauthPayloadRepository } from '../db/repositories/oauth-payloads.ts';
import type { Database } from '../db/schema.ts';
import type { RecordRef, RecordType, RowOf } from './validation.ts';

/**
 * How an import writes each record type's validated rows (validation.ts says what a record must
 * be), in the import's transaction.
 */

/** A row as it is written: validated, then stamped by the importer. */
export type Stamped<Row> = Row & ChangeStamp;

/** How the importer writes one record type. */
export interface RecordWriter<Row extends { id: string }> {
  /**
   * The table of rows that belong to an account (`account_id`, which must name an account that
   * exists), where a record may not take over another account's row; null for accounts themselves.
   */
  ownedIn: AccountOwnedTable | null;
  /**
   * Whether `upsert` itself refuses to move a row to another account, writing fewer rows instead:
   * then ownership is looked up only when it wrote fewer; otherwise before every batch.
   */
  upsertRefusesMoves: boolean;
  /**
   * Writes a batch, updating by id; returns the number of rows written or left as they were
   * because nothing in them changed (an unchanged row keeps its place in the changes feed).
   */
  upsert(db: Kysely<Database>, rows: Stamped<Row>[], now: string): Promise<number>;
  /**
   * Adds a batch of rows none of whose ids is stored, with less work than `upsert` where the store
   * allows (`incidentRepository.insertsNewFaster`); incidents only, the kind that comes by the
   * million. Rejects when an id is stored, and the transaction is then lost: the importer starts
   * again with `upsert`.
   */
  insertNew?(db: Kysely<Database>, rows: Stamped<Row>[]): Promise<void>;
  /**
   * Takes a batch of `"deleted": true` records out of the public view (records that are not there
   * are skipped); returns how many it took out, and the incidents among them with the paging
   * positions they held. Null: the type cannot be deleted.
   */
  remove:
    | ((
        db: Kysely<Database>,
        refs: Stamped<RecordRef>[],
      ) => Promise<{ count: number; incidents: RemovedIncident[] }>)
    | null;
}

function namedResource(table: 'departments' | 'locations'): RecordWriter<RowOf<'department'>> {
  return {
    ownedIn: table,
    upsertRefusesMoves: false,
    upsert: async (db, rows) => {
      await namedResourceRepository.upsertMany(db, table, rows);
      return rows.length;
    },
    remove: async (db, refs) => ({ count: await deactivateMany(db, table, refs), incidents: [] }),
  };
}

/** Each record type's writer. */
export const RECORD_WRITERS: { [T in RecordType]: RecordWriter<RowOf<T>> } = {
  account: {
    ownedIn: null,
    upsertRefusesMoves: false,
    upsert: async (db, rows, now) => {
      await accountRepository.upsertMany(db, rows, now);
      return rows.length;
    },
    remove: null,
  },
  department: namedResource('departments'),
  location: namedResource('locations'),
  user: {
    ownedIn: 'users',
    // Checked first: the email check relies on knowing whose row an id is.
    upsertRefusesMoves: false,
    // A deactivated user's partner-app grants end with the import, in its transaction: their
    // refresh and access tokens are gone, not merely refused while the user stays inactive.
    upsert: async (db, rows) => {
      await userRepository.upsertMany(db, rows);
      await oauthPayloadRepository.deleteByUserIds(
        db,
        rows.filter((row) => row.active === 0).map((row) => row.id),
      );
      return rows.length;
    },
    remove: async (db, refs) => {
      const count = await deactivateMany(db, 'users', refs);
      await oauthPayloadRepository.deleteByUserIds(
        db,
        refs.map((ref) => ref.id),
      );
      return { count, incidents: [] };
    },
  },
  incident: {
    ownedIn: 'incidents',
    // One statement instead of a lookup per batch (see incidentRepository.upsertMany).
    upsertRefusesMoves: true,
    upsert: (db, rows) => incidentRepository.upsertMany(db, rows),
    insertNew: (db, rows) => incidentRepository.insertNew(db, rows),
    remove: async (db, refs) => {
      const incidents = await incidentRepository.deleteMany(db, refs);
      return { count: incidents.length, incidents };
    },
  },
};
