import { once } from 'node:events';
import { createWriteStream } from 'node:fs';

/**
 * A realistic, reproducible demo account in the import format (NDJSON records with `type`):
 * departments, locations, users with roles, and incidents spread over the two years before `now`.
 * The same seed always gives the same records, so the demo and the benchmarks are repeatable.
 */

export const DEMO_ACCOUNT_ID = '0b5e6c1a-8d2f-4c3e-9a7b-1f2e3d4c5b6a';
export const DEMO_ADMIN_EMAIL = 'dana.whitfield@northwind-demo.example';

const DEPARTMENTS = [
  'Operations',
  'Maintenance',
  'Warehouse',
  'Quality Assurance',
  'Health & Safety',
  'Logistics',
  'Engineering',
  'Facilities',
];
const LOCATIONS = [
  'Northwind Plant A',
  'Northwind Plant B',
  'Riverside Distribution Centre',
  'Head Office',
  'Harbour Yard',
  'Eastgate Depot',
];
const FIRST = [
  'Dana',
  'Luis',
  'Priya',
  'Tom',
  'Aisha',
  'Marek',
  'Sofia',
  'Kenji',
  'Grace',
  'Omar',
  'Hannah',
  'Ravi',
  'Elena',
  'Jamal',
  'Ingrid',
  'Chen',
  'Fatima',
  'Noah',
  'Zara',
  'Pieter',
];
const LAST = [
  'Whitfield',
  'Moreno',
  'Raman',
  'Becker',
  'Okafor',
  'Novak',
  'Lindqvist',
  'Tanaka',
  'Osei',
  'Haddad',
  'Brennan',
  'Iyer',
  'Petrova',
  'Carter',
  'Solberg',
  'Wei',
  'Rahman',
  'Fischer',
  'Mensah',
  'de Vries',
];
const JOB_TITLES = [
  'Shift Supervisor',
  'Maintenance Technician',
  'Forklift Operator',
  'QA Inspector',
  'EHS Coordinator',
  'Site Manager',
  'Process Engineer',
  'Logistics Planner',
];
const STATUSES = [
  ['closed', 55],
  ['resolved', 15],
  ['under_investigation', 12],
  ['open', 10],
  ['action_required', 8],
] as const;
const EVENTS = [
  'Slip on wet floor near the loading bay',
  'Forklift collided with racking upright',
  'Minor laceration while changing a blade',
  'Chemical splash during drum transfer',
  'Near miss: unsecured load on mezzanine',
  'Back strain lifting a pallet by hand',
  'Trip over a trailing cable in the workshop',
  'Hand caught in conveyor guard opening',
  'Fire alarm triggered by overheating motor',
  'Fall from the second step of a ladder',
  'Eye irritation from airborne dust',
  'Vehicle reversing without a banksman',
];

/** Deterministic pseudo-random numbers (mulberry32). */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A version-4-shaped UUID from the generator, so that ids are repeatable too. */
function seededUuid(random: () => number): string {
  const hex = Array.from({ length: 32 }, () => Math.floor(random() * 16).toString(16));
  hex[12] = '4';
  hex[16] = ((Number.parseInt(hex[16] as string, 16) & 0x3) | 0x8).toString(16);
  const s = hex.join('');
  return `${s.slice(0, 8)}-${s.slice(8, 12)}-${s.slice(12, 16)}-${s.slice(16, 20)}-${s.slice(20)}`;
}

function pick<T>(random: () => number, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)] as T;
}

export interface DemoOptions {
  accountId?: string;
  accountName?: string;
  /** Hourly allowance of the account; the benchmark raises it so that load never reaches it. */
  rateLimitPerHour?: number;
  incidents: number;
  users?: number;
  seed?: number;
  now?: Date;
}

/** Yields every record of one demo account, parents first. */
export function* demoRecords(options: DemoOptions): Generator<Record<string, unknown>> {
  const random = seededRandom(options.seed ?? 42);
  const accountId = options.accountId ?? DEMO_ACCOUNT_ID;
  const now = (options.now ?? new Date()).getTime();
  const twoYears = 730 * 24 * 3600 * 1000;
  const earliest = now - twoYears;
  const iso = (t: number) => new Date(t).toISOString();

  yield {
    type: 'account',
    id: accountId,
    name: options.accountName ?? 'Northwind Manufacturing (demo)',
    api_access: true,
    rate_limit_per_hour: options.rateLimitPerHour ?? 1000,
  };
  for (const [index, name] of DEPARTMENTS.entries()) {
    yield {
      type: 'department',
      id: seededUuid(random),
      account_id: accountId,
      name,
      active: index !== DEPARTMENTS.length - 1,
      created_at: iso(earliest - 86_400_000 * (30 - index)),
    };
  }
  for (const [index, name] of LOCATIONS.entries()) {
    yield {
      type: 'location',
      id: seededUuid(random),
      account_id: accountId,
      name,
      active: index !== LOCATIONS.length - 1,
      created_at: iso(earliest - 86_400_000 * (20 - index)),
    };
  }
  const userCount = options.users ?? 40;
  for (let i = 0; i < userCount; i += 1) {
    const first = FIRST[i % FIRST.length] as string;
    const last = LAST[(i * 7) % LAST.length] as string;
    const email =
      i === 0
        ? DEMO_ADMIN_EMAIL
        : `${`${first}.${last}.${i}`.toLowerCase().replace(/[^a-z0-9.]/g, '')}@northwind-demo.example`;
    const role = i === 0 ? 'super_admin' : i < 3 ? 'admin' : i < 10 ? 'manager' : 'employee';
    yield {
      type: 'user',
      id: seededUuid(random),
      account_id: accountId,
      name: `${first} ${last}`,
      email,
      role,
      department: pick(random, DEPARTMENTS),
      job_title: i === 0 ? 'Head of EHS' : pick(random, JOB_TITLES),
      active: i % 17 !== 16,
      vendor_support: i === userCount - 1,
      created_at: iso(earliest + Math.floor(random() * twoYears * 0.2)),
    };
  }

  const statusTotal = STATUSES.reduce((sum, [, weight]) => sum + weight, 0);
  const sequence = new Map<number, number>();
  // Incidents are generated oldest first so that each year's numbers count up with time.
  const step = twoYears / Math.max(options.incidents, 1);
  let previous = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < options.incidents; i += 1) {
    // Strictly increasing, as an export in creation order is: a file in paging order.
    const created = Math.max(Math.floor(earliest + i * step + random() * step), previous + 1);
    previous = created;
    const year = new Date(created).getUTCFullYear();
    const seq = (sequence.get(year) ?? 0) + 1;
    sequence.set(year, seq);
    let roll = random() * statusTotal;
    let status: string = STATUSES[0][0];
    for (const [name, weight] of STATUSES) {
      roll -= weight;
      if (roll < 0) {
        status = name;
        break;
      }
    }
    const rated = random() > 0.08;
    const occurred = created - Math.floor(random() * 3) * 86_400_000;
    yield {
      type: 'incident',
      id: seededUuid(random),
      account_id: accountId,
      incident_number: `INC-${year}-${String(seq).padStart(4, '0')}`,
      description: `${pick(random, EVENTS)} (${pick(random, DEPARTMENTS)}).`,
      status,
      severity_likelihood: rated ? 1 + Math.floor(random() * 5) : null,
      severity_impact: rated ? 1 + Math.floor(random() * 5) : null,
      location: pick(random, LOCATIONS),
      incident_date: iso(occurred).slice(0, 10),
      created_at: iso(created),
      updated_at: iso(Math.min(created + Math.floor(random() * 30 * 86_400_000), now)),
    };
  }
}

/** Writes records as NDJSON, respecting back-pressure so any size streams in constant memory. */
export async function writeNdjson(path: string, records: Iterable<Record<string, unknown>>): Promise<void> {
  const out = createWriteStream(path, { encoding: 'utf8' });
  for (const record of records) {
    if (!out.write(`${JSON.stringify(record)}\n`)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
}
