import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { DEMO_ACCOUNT_ID, demoRecords, seededRandom, writeNdjson } from '../src/demo/demo-data.ts';
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

/** The orders a full-field file can be written in (`fullIncidentsDataset`). */
export const IMPORT_ORDERS = ['oldest first', 'newest first', 'shuffled'] as const;
export type ImportOrder = (typeof IMPORT_ORDERS)[number];

const REPORT_SENTENCES = [
  'An operator slipped on hydraulic fluid that had leaked from a pallet truck near bay 4.',
  'The forklift was reversing out of aisle 12 when its counterweight struck the upright of a racking bay.',
  'A contractor cut the back of his left hand while replacing a guard on the band saw.',
  'A strong solvent smell was reported in the paint store after the extraction fan tripped.',
  'The first aider attended within five minutes and the injured person returned to work after treatment.',
  'The area was cordoned off, the spill absorbed and the floor cleaned before work resumed.',
  'The supervisor has asked maintenance to inspect the equipment before it is used again.',
  'Witnesses said the walkway markings are worn and hard to see under the new lighting.',
];
const STATUSES = ['open', 'investigating', 'resolved', 'closed'];
const PLACES = ['Plant A, line 2', 'Plant B, press shop', 'Riverside DC, bay 4', 'Harbour Yard, gate 3'];

/**
 * One incident of a full-field file, from its index alone (so that the file can be written in any
 * order with the same records): every field the import takes is set, `severity_score` too, as an
 * export writes it, and the description is a few sentences (about 300 characters), not a line.
 */
function fullIncident(i: number, accountId: string, start: number) {
  const random = seededRandom(0x5eed ^ Math.imul(i + 1, 0x9e3779b1));
  const hex = Array.from({ length: 4 }, () =>
    Math.floor(random() * 0x1_0000_0000)
      .toString(16)
      .padStart(8, '0'),
  ).join('');
  const id = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
  // Strictly increasing with the index: index order is paging order.
  const created = start + i * 60_000 + Math.floor(random() * 59_000);
  const createdAt = new Date(created).toISOString();
  const likelihood = Math.floor(random() * 101);
  const impact = Math.floor(random() * 101);
  const sentences = Array.from(
    { length: 3 },
    (_, k) => REPORT_SENTENCES[(i + k * 3 + Math.floor(random() * 2)) % REPORT_SENTENCES.length],
  );
  return {
    type: 'incident',
    id,
    account_id: accountId,
    incident_number: `INC-${createdAt.slice(0, 4)}-${String(i + 1).padStart(7, '0')}`,
    description: `${sentences.join(' ')} Reference ${i + 1}.`,
    status: STATUSES[i % STATUSES.length],
    severity_likelihood: likelihood,
    severity_impact: impact,
    severity_score: likelihood * impact,
    location: PLACES[i % PLACES.length],
    incident_date: new Date(created - (i % 3) * 86_400_000).toISOString().slice(0, 10),
    created_at: createdAt,
    updated_at: new Date(created + (i % 7) * 3_600_000).toISOString(),
  };
}

/**
 * A new account (`accountId`) and `count` incidents of it with every field set (`fullIncident`),
 * as NDJSON in `order`: oldest first (paging order), newest first (the order of the lists and of
 * every export) or shuffled (a seeded permutation, 4 bytes per incident while writing). The same
 * `count` gives the same records in every order.
 */
export async function fullIncidentsDataset(
  name: string,
  count: number,
  order: ImportOrder,
  accountId = '7c0f3a52-1e4b-4d6a-8b2c-5f9e8d7c6b5a',
): Promise<string> {
  const path = join(WORK, name);
  const indexes = new Uint32Array(count);
  for (let i = 0; i < count; i += 1) indexes[i] = order === 'newest first' ? count - 1 - i : i;
  if (order === 'shuffled') {
    const random = seededRandom(1234);
    for (let i = count - 1; i > 0; i -= 1) {
      const j = Math.floor(random() * (i + 1));
      const swap = indexes[i] as number;
      indexes[i] = indexes[j] as number;
      indexes[j] = swap;
    }
  }
  const start = GENERATED_UNTIL.getTime() - count * 60_000;
  function* records() {
    yield {
      type: 'account',
      id: accountId,
      name: 'Full-field import (bench)',
      api_access: true,
      rate_limit_per_hour: 1_000_000_000,
    };
    for (const i of indexes) yield fullIncident(i, accountId, start);
  }
  await writeNdjson(path, records());
  return path;
}
