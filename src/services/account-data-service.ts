import { once } from 'node:events';
import type { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import type { Kysely } from 'kysely';
import type { DatabaseHandle } from '../db/database.ts';
import {
  type AuditEventRecordRow,
  accountDataRepository,
  type ErasedCounts,
  type IncidentRecordRow,
  type NamedRecordRow,
  type OauthClientMetadataRow,
  type OauthGrantRow,
  type SeqKey,
  type UserRecordRow,
  type WebhookEndpointMetadataRow,
} from '../db/repositories/account-data.ts';
import { type AccountRow, accountRepository } from '../db/repositories/accounts.ts';
import type { Database } from '../db/schema.ts';
import { storeFor } from '../db/store.ts';
import { InputError } from '../errors.ts';
import type { ExportOnlyType, RecordType } from '../import/validation.ts';
import { toView as toKeyView } from './api-key-service.ts';
import { grantOf } from './oauth-client-service.ts';

/**
 * A tenant's data, out and erased (`safety-api accounts export` and `accounts delete`).
 *
 * The export is one NDJSON file: first the account's records as `safety-api import` takes them
 * (`account`, `department`, `location`, `user`, `incident`: every one, inactive and vendor-support
 * ones included, incidents in paging order so that an import places them without re-ranking), then
 * what the tenant is owed but an import cannot restore, each with a `type` of its own
 * (`EXPORT_ONLY_TYPES`): `api_key` (as `keys list --json` shows it: never the hash),
 * `webhook_endpoint` (never a secret), `oauth_client` (never a secret hash), `oauth_grant` (never a
 * token) and `audit_event`. It is read from one snapshot (src/db/snapshot.ts), a chunk at a time,
 * and written as fast as the file takes it, so memory stays bounded whatever the account holds.
 */

/** Lines written per type. */
export type ExportCounts = Record<RecordType | ExportOnlyType, number>;

export const EXPORT_TYPES: readonly (RecordType | ExportOnlyType)[] = [
  'account',
  'department',
  'location',
  'user',
  'incident',
  'api_key',
  'webhook_endpoint',
  'oauth_client',
  'oauth_grant',
  'audit_event',
];

/** Rows per read: the export service's sizes (`Store.chunkRows`), for the same reasons. */
const chunkRowsOf = (db: Kysely<Database>) => storeFor(db).chunkRows;

const flag = (value: number) => value === 1;

const accountLine = (row: AccountRow) => ({
  type: 'account',
  id: row.id,
  name: row.name,
  api_access: flag(row.api_access),
  rate_limit_per_hour: row.rate_limit_per_hour,
});

const namedLine = (type: 'department' | 'location', row: NamedRecordRow) => ({
  type,
  id: row.id,
  account_id: row.account_id,
  name: row.name,
  active: flag(row.active),
  created_at: row.created_at,
});

const userLine = (row: UserRecordRow) => ({
  type: 'user',
  id: row.id,
  account_id: row.account_id,
  name: row.name,
  email: row.email,
  role: row.role,
  department: row.department,
  job_title: row.job_title,
  active: flag(row.active),
  vendor_support: flag(row.vendor_support),
  created_at: row.created_at,
});

const incidentLine = (row: IncidentRecordRow) => ({
  type: 'incident',
  id: row.id,
  account_id: row.account_id,
  incident_number: row.incident_number,
  description: row.description,
  status: row.status,
  severity_likelihood: row.severity_likelihood,
  severity_impact: row.severity_impact,
  location: row.location,
  incident_date: row.incident_date,
  created_at: row.created_at,
  updated_at: row.updated_at,
});

const endpointLine = (row: WebhookEndpointMetadataRow) => ({
  type: 'webhook_endpoint',
  id: row.id,
  account_id: row.account_id,
  url: row.url,
  description: row.description,
  events: JSON.parse(row.events) as string[],
  state: row.state,
  disabled_reason: row.disabled_reason,
  position: row.position,
  failing_since: row.failing_since,
  last_attempt_at: row.last_attempt_at,
  last_status: row.last_status,
  created_by: row.created_by,
  created_at: row.created_at,
  updated_at: row.updated_at,
});

const clientLine = (row: OauthClientMetadataRow) => ({
  type: 'oauth_client',
  client_id: row.client_id,
  account_id: row.account_id,
  name: row.name,
  public: flag(row.is_public),
  redirect_uris: JSON.parse(row.redirect_uris) as string[],
  created_at: row.created_at,
});

const grantLine = (accountId: string, row: OauthGrantRow) => ({
  type: 'oauth_grant',
  grant_id: row.id,
  account_id: accountId,
  client_id: row.client_id,
  user_id: row.user_id,
  ...grantOf(row.payload),
  expires_at: row.expires_at,
  last_used_at: row.last_used_at,
});

const auditLine = (row: AuditEventRecordRow) => ({
  type: 'audit_event',
  id: row.id,
  account_id: row.account_id,
  subject_type: row.subject_type,
  subject_id: row.subject_id,
  actor: row.actor,
  action: row.action,
  detail: row.detail,
  created_at: row.created_at,
});

/** Lines to a writable stream, a chunk at a time, waiting whenever it asks to (backpressure). */
class LineSink {
  readonly counts = Object.fromEntries(EXPORT_TYPES.map((type) => [type, 0])) as ExportCounts;

  /** The stream's failure (a file that cannot be opened or written), thrown at the next write. */
  private failure: Error | null = null;

  private readonly out: Writable;

  constructor(out: Writable) {
    this.out = out;
    out.on('error', (error) => {
      this.failure = error;
    });
  }

  async write(lines: { type: string }[]): Promise<void> {
    if (this.failure !== null) throw this.failure;
    if (lines.length === 0) return;
    let text = '';
    for (const line of lines) {
      text += `${JSON.stringify(line)}\n`;
      this.counts[line.type as keyof ExportCounts] += 1;
    }
    // `once` rejects if the stream fails while it waits.
    if (!this.out.write(text)) await once(this.out, 'drain');
  }

  async end(): Promise<void> {
    this.out.end();
    await finished(this.out);
  }
}

/** Reads a keyset walk to its end: `read(after)` gives the next chunk, `keyOf` the walk's key of a row. */
async function* walk<Row, Key>(
  read: (after: Key | null) => Promise<Row[]>,
  keyOf: (row: Row) => Key,
  limit: number,
): AsyncGenerator<Row[]> {
  let after: Key | null = null;
  for (;;) {
    const rows = await read(after);
    if (rows.length > 0) yield rows;
    if (rows.length < limit) return;
    after = keyOf(rows.at(-1) as Row);
  }
}

const seqKey = (row: SeqKey): SeqKey => ({ change_seq: row.change_seq, id: row.id });

export const accountDataService = {
  /**
   * Writes the account's export (see above) to the stream `open` returns, which is called only once
   * the account is known to exist; returns the lines written per type. Throws an InputError for an
   * unknown account. `chunkRows` overrides the rows read at a time (tests).
   */
  async exportAccount(
    database: Pick<DatabaseHandle, 'snapshots'>,
    accountId: string,
    open: () => Writable,
    { chunkRows }: { chunkRows?: number } = {},
  ): Promise<ExportCounts> {
    const snapshot = await database.snapshots.open();
    try {
      const sdb = snapshot.db;
      const limit = chunkRows ?? chunkRowsOf(sdb);
      // The snapshot's first read: everything after sees the store as it stood then.
      const account = await accountRepository.findById(sdb, accountId);
      if (account === undefined) throw new InputError(`no account with id "${accountId}"`);
      const sink = new LineSink(open());
      await sink.write([accountLine(account)]);
      for (const table of ['departments', 'locations'] as const) {
        const type = table === 'departments' ? 'department' : 'location';
        const chunks = walk(
          (after: SeqKey | null) => accountDataRepository.namedChunk(sdb, table, accountId, after, limit),
          seqKey,
          limit,
        );
        for await (const rows of chunks) await sink.write(rows.map((row) => namedLine(type, row)));
      }
      const users = walk(
        (after: SeqKey | null) => accountDataRepository.userChunk(sdb, accountId, after, limit),
        seqKey,
        limit,
      );
      for await (const rows of users) await sink.write(rows.map(userLine));
      const incidents = walk(
        (after: number | null) => accountDataRepository.incidentChunk(sdb, accountId, after ?? 0, limit),
        (row) => row.position,
        limit,
      );
      for await (const rows of incidents) await sink.write(rows.map(incidentLine));

      const now = new Date();
      const keys = walk(
        (after: { created_at: string; id: string } | null) =>
          accountDataRepository.apiKeyChunk(sdb, accountId, after, limit),
        (row) => ({ created_at: row.created_at, id: row.id }),
        limit,
      );
      for await (const rows of keys)
        await sink.write(
          rows.map((row) => ({ type: 'api_key', ...toKeyView(row, now), updated_at: row.updated_at })),
        );
      await sink.write((await accountDataRepository.webhookEndpoints(sdb, accountId)).map(endpointLine));
      const clients = await accountDataRepository.oauthClients(sdb, accountId);
      await sink.write(clients.map(clientLine));
      for (const client of clients) {
        const grants = walk(
          (after: string | null) =>
            accountDataRepository.oauthGrantChunk(sdb, client.client_id, after, limit),
          (row) => row.id,
          limit,
        );
        for await (const rows of grants) await sink.write(rows.map((row) => grantLine(accountId, row)));
      }
      const audit = walk(
        (after: number | null) => accountDataRepository.auditChunk(sdb, accountId, after ?? 0, limit),
        (row) => row.id,
        limit,
      );
      for await (const rows of audit) await sink.write(rows.map(auditLine));
      await sink.end();
      return sink.counts;
    } finally {
      await snapshot.release();
    }
  },

  /**
   * Deletes the account and every row of it, in every table, in one transaction; returns the rows
   * deleted per table. Throws an InputError, deleting nothing, for an unknown account.
   */
  async erase(db: Kysely<Database>, accountId: string): Promise<ErasedCounts> {
    // Foreign keys stay enforced (SQLite's bulk settings would lift them): every table is emptied
    // of the account by name, and the cascades of the account's row catch what a table added
    // later and not named there would otherwise keep.
    const counts = await db.transaction().execute((trx) => accountDataRepository.erase(trx, accountId));
    if (counts === undefined) throw new InputError(`no account with id "${accountId}"`);
    return counts;
  },
};
