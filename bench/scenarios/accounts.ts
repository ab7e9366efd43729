import { rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { DEMO_ACCOUNT_ID } from '../../src/demo/demo-data.ts';
import { importFile } from '../data.ts';
import { cli } from '../processes.ts';
import { addRow, fmt, log } from '../report.ts';
import { WORK } from '../settings.ts';

/** The CLI's peak RSS the account commands are judged by: the import's (issue 25), whatever the account holds. */
const RSS_TARGET_MB = 256;

/**
 * Issue 39: a tenant's data out and erased, with the real CLI on a store holding the demo account
 * with `incidents` incidents (`env`): `accounts export` (time, peak RSS, file size), the export
 * imported into an empty store (`freshEnv`), then `accounts delete` of the account (time, peak RSS).
 */
export async function accountsRoundTrip(
  label: string,
  env: Record<string, string>,
  freshEnv: Record<string, string>,
  incidents: number,
): Promise<void> {
  const file = join(WORK, 'account-export.ndjson');
  try {
    log(`${label}: accounts export of ${fmt(incidents)} incidents`);
    const exported = await cli(['accounts', 'export', '--account', DEMO_ACCOUNT_ID, '--to', file], env);
    const mb = statSync(file).size / 1024 / 1024;
    addRow({
      measurement: `${label}: accounts export, ${fmt(incidents)} incidents (whole CLI run)`,
      result: `${fmt(exported.seconds, 1)} s = ${fmt(incidents / exported.seconds)} incidents/s, ${fmt(mb)} MB`,
      target: 'report',
      pass: null,
    });
    addRow({
      measurement: `${label}: accounts export, peak RSS of the CLI`,
      result: `${fmt(exported.rssMb)} MB`,
      target: `< ${RSS_TARGET_MB} MB`,
      pass: exported.rssMb < RSS_TARGET_MB,
    });
    log(`${label}: importing the export into an empty store`);
    const imported = await importFile(file, freshEnv);
    addRow({
      measurement: `${label}: import of that export into an empty store`,
      result: `${fmt(imported.seconds, 1)} s, peak RSS ${fmt(imported.rssMb)} MB`,
      target: 'report',
      pass: null,
    });
    log(`${label}: accounts delete`);
    const deleted = await cli(
      ['accounts', 'delete', '--account', DEMO_ACCOUNT_ID, '--confirm', DEMO_ACCOUNT_ID],
      env,
    );
    addRow({
      measurement: `${label}: accounts delete, ${fmt(incidents)} incidents (whole CLI run, one transaction)`,
      result: `${fmt(deleted.seconds, 1)} s, peak RSS ${fmt(deleted.rssMb)} MB`,
      target: 'report',
      pass: null,
    });
  } finally {
    rmSync(file, { force: true });
  }
}
