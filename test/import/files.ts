import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Import files and records for the import tests. */

/** Where the files are written. */
export const dir = mkdtempSync(join(tmpdir(), 'safety-import-'));

export function ndjson(records: object[]): string {
  const path = join(dir, `${randomUUID()}.ndjson`);
  writeFileSync(path, records.map((r) => JSON.stringify(r)).join('\n'));
  return path;
}

export function json(document: object): string {
  const path = join(dir, `${randomUUID()}.json`);
  writeFileSync(path, JSON.stringify(document));
  return path;
}

export const account = (id: string, extra: object = {}) => ({
  type: 'account',
  id,
  name: 'Acme',
  api_access: true,
  rate_limit_per_hour: 500,
  ...extra,
});
export const incident = (accountId: string, n: number, createdAt: string, extra: object = {}) => ({
  type: 'incident',
  id: randomUUID(),
  account_id: accountId,
  incident_number: `INC-2025-${String(n).padStart(4, '0')}`,
  status: 'open',
  severity_likelihood: 2,
  severity_impact: 3,
  created_at: createdAt,
  ...extra,
});

/** `n` minutes into 2025, in the form imports and the API write. */
export const minute = (n: number) => new Date(Date.UTC(2025, 0, 1) + n * 60_000).toISOString();

/** A `"deleted": true` record. */
export const gone = (type: string, id: string, accountId: string) => ({
  type,
  id,
  account_id: accountId,
  deleted: true,
});
