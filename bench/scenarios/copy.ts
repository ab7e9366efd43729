import { cli } from '../processes.ts';
import { withPostgresDatabase } from '../data.ts';
import { addRow, fmt, log } from '../report.ts';

/** Issue 39: copy-store of a million incidents, SQLite to PostgreSQL, at this rate at least. */
const RATE_TARGET = 50_000;
const TARGET_INCIDENTS = 1_000_000;

/**
 * `safety-api copy-store` of the SQLite store at `sqliteUrl` (holding `incidents` incidents) into a
 * fresh PostgreSQL database, with the real CLI: incidents per second of the whole run (migrating
 * the target, copying every table, building the indexes, reading everything back for the checksums,
 * ANALYZE), the rate of the incidents' own rows as the command reports it, and the peak RSS.
 */
export async function copyStoreRate(sqliteUrl: string, incidents: number): Promise<void> {
  await withPostgresDatabase(async (url) => {
    log(`copying ${fmt(incidents)} incidents from SQLite to PostgreSQL`);
    const run = await cli(['copy-store', '--from', sqliteUrl, '--to', url], {});
    const rate = incidents / run.seconds;
    const judged = incidents >= TARGET_INCIDENTS;
    const target = `>= ${fmt(RATE_TARGET)}/s`;
    addRow({
      measurement: `copy-store ${fmt(incidents)} incidents SQLite → PostgreSQL (whole CLI run, verified)`,
      result: `${fmt(run.seconds, 1)} s = ${fmt(rate)} incidents/s`,
      target: judged ? target : `report (${target} is for ${fmt(TARGET_INCIDENTS)})`,
      pass: judged ? rate >= RATE_TARGET : null,
    });
    const copied = /Copied incidents: [\d,]+ rows in ([\d.]+) s/.exec(run.stdout);
    if (copied !== null)
      addRow({
        measurement:
          'copy-store: the incidents table alone (read, checksum, COPY; before indexes and verification)',
        result: `${copied[1]} s = ${fmt(incidents / Number(copied[1]))} incidents/s`,
        target: 'report',
        pass: null,
      });
    addRow({
      measurement: `copy-store ${fmt(incidents)} incidents, peak RSS of the CLI`,
      result: `${fmt(run.rssMb)} MB`,
      target: 'report',
      pass: null,
    });
  });
}
