import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { DEMO_ACCOUNT_ID, demoRecords, writeNdjson } from '../src/demo/demo-data.ts';
import { cli } from './processes.ts';
import { settings, WORK } from './settings.ts';

/** The generator's `now`: every generated incident is older, so a later incident is an append. */
const GENERATED_UNTIL = new Date('2026-01-01T00:00:00Z');

/**
 * Writes one demo account with `incidents` incidents as NDJSON, in creation order. The hourly
 * allowance of 10⁹ keeps the rate limiter running on every request without ever refusing one.
 */
export async function generateDataset(name: string, incidents: number): Promise<string> {
  const path = join(WORK, name);
  await writeNdjson(path, demoRecords({ incidents, rateLimitPerHour: 1_000_000_000, now: GENERATED_UNTIL }));
  return path;
}

/** `count` incidents newer than every generated one, as an NDJSON file to import while the server runs. */
export async function appendDataset(count: number): Promise<string> {
  const path = join(WORK, 'append.ndjson');
  const records = Array.from({ length: count }, (_, i) => ({
    type: 'incident',
    id: randomUUID(),
    account_id: DEMO_ACCOUNT_ID,
    incident_number: `INC-2026-9${String(i).padStart(4, '0')}`,
    status: 'open',
    created_at: new Date(GENERATED_UNTIL.getTime() + 3_600_000 + i * 1000).toISOString(),
  }));
  await writeNdjson(path, records);
  return path;
}

/** The account, its departments, locations and users, no incident: what webhooks need before an endpoint exists. */
export async function accountDataset(name: string): Promise<string> {
  const path = join(WORK, name);
  await writeNdjson(
    path,
    demoRecords({ incidents: 0, rateLimitPerHour: 1_000_000_000, now: GENERATED_UNTIL }),
  );
  return path;
}

const DESCRIPTIONS = [
  'Slipped on a wet floor near the loading dock.',
  'Forklift reversed into a rack; no one hurt.',
  'Cut on the hand while changing a blade.',
  'Chemical smell in the paint store; area ventilated.',
];
const LOCATIONS = ['Warehouse', 'Assembly hall', 'Paint store', 'Yard'];
/** Incidents written by `incidentsDataset` so far: each new one is newer than all of them. */
let incidentsWritten = 0;

/**
 * `count` new incidents of the demo account as an NDJSON file, each newer than every generated
 * one and every one this function wrote before (so that each import appends), shaped like the demo
 * generator's; ids are random, so the file can be imported after any other.
 */
export async function incidentsDataset(name: string, count: number): Promise<string> {
  const path = join(WORK, name);
  const from = incidentsWritten;
  incidentsWritten += count;
  const start = GENERATED_UNTIL.getTime() + 86_400_000;
  function* records() {
    for (let i = from; i < from + count; i += 1) {
      const created = new Date(start + i * 1000).toISOString();
      yield {
        type: 'incident',
        id: randomUUID(),
        account_id: DEMO_ACCOUNT_ID,
        incident_number: `INC-2026-${String(100_000 + i)}`,
        description: DESCRIPTIONS[i % DESCRIPTIONS.length],
        status: i % 3 === 0 ? 'closed' : 'open',
        severity_likelihood: 1 + (i % 5),
        severity_impact: 1 + ((i * 7) % 5),
        location: LOCATIONS[i % LOCATIONS.length],
        incident_date: created.slice(0, 10),
        created_at: created,
        updated_at: created,
      };
    }
  }
  await writeNdjson(path, records());
  return path;
}

/** How the generator writes an incident: its id first after the type (`demoRecords`, `writeNdjson`). */
const INCIDENT_LINE = /^\{"type":"incident","id":"([^"]+)"/;

/**
 * `count` incidents of the data set `file`, chosen at random (a reservoir sample: one pass, `count`
 * ids held), as an NDJSON file of `"deleted": true` records to import.
 */
export async function deletionDataset(file: string, count: number): Promise<string> {
  const chosen: string[] = [];
  let seen = 0;
  for await (const line of createInterface({ input: createReadStream(file) })) {
    const id = INCIDENT_LINE.exec(line)?.[1];
    if (id === undefined) continue;
    seen += 1;
    if (chosen.length < count) chosen.push(id);
    else {
      const slot = Math.floor(Math.random() * seen);
      if (slot < count) chosen[slot] = id;
    }
  }
  const path = join(WORK, 'deletions.ndjson');
  await writeNdjson(
    path,
    chosen.map((id) => ({ type: 'incident', id, account_id: DEMO_ACCOUNT_ID, deleted: true })),
  );
  return path;
}

/** Imports `file` with the real CLI (`safety-api import`): wall time and peak RSS of the whole run. */
export function importFile(file: string, env: Record<string, string>) {
  return cli(['import', file], env);
}

/** Creates an API key of the demo account with the real CLI; returns the Authorization header. */
export async function createKey(name: string, env: Record<string, string>): Promise<Record<string, string>> {
  const created = await cli(['keys', 'create', '--account', DEMO_ACCOUNT_ID, '--name', name, '--json'], env);
  return { authorization: `Bearer ${JSON.parse(created.stdout).key}` };
}

/**
 * Runs `body` with the URL of a fresh PostgreSQL database (`safety_bench_<pid><suffix>`), dropped
 * afterwards whatever happens.
 */
export async function withPostgresDatabase<T>(body: (url: string) => Promise<T>, suffix = ''): Promise<T> {
  const name = `safety_bench_${process.pid}${suffix}`;
  const admin = new pg.Client({ connectionString: settings.pgAdminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
    const url = new URL(settings.pgAdminUrl);
    url.pathname = `/${name}`;
    return await body(url.toString());
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}
