import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { importFile } from '../../src/import/import.ts';
import type { TestContext } from '../helpers.ts';

/** Changes for the webhook tests, made by imports (the path the CLI takes), and a wait for a state. */

/** An import record of an incident of `accountId`; `i` sets its number and its dates. */
export function incident(accountId: string, id: string, i: number, fields: Record<string, unknown> = {}) {
  return {
    type: 'incident',
    id,
    account_id: accountId,
    incident_number: `INC-2025-${i}`,
    status: 'open',
    created_at: new Date(Date.UTC(2025, 0, 1) + i * 1000).toISOString(),
    updated_at: new Date(Date.UTC(2025, 0, 1) + i * 1000).toISOString(),
    ...fields,
  };
}

/** Imports `records` in one transaction: their changes get consecutive seqs, and one commit. */
export async function importRecords(ctx: TestContext, records: object[]): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'safety-webhooks-'));
  try {
    const path = join(dir, `${randomUUID()}.ndjson`);
    writeFileSync(path, records.map((record) => JSON.stringify(record)).join('\n'));
    await importFile(ctx.commandLineDb, path, { retentionDays: ctx.config.changesRetentionDays });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
