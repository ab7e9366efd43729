import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import pg from 'pg';
import type { StoreName } from '../../src/db/database.ts';
import { DEMO_ACCOUNT_ID, demoRecords, writeNdjson } from '../../src/demo/demo-data.ts';
import { createTestDatabase, runCli, type ServerProcess, startServer } from '../helpers.ts';
import { freePort, type OwnRedis, startRedis, startRelay } from './harness.ts';
import { sleep } from '../wait.ts';

/**
 * A chaos soak in small: two server instances on one store, with clients reading, a follower of
 * the changes feed, imports that create, update, delete and bring back incidents, API keys created,
 * disabled, enabled and revoked from the CLI, three webhook receivers (one healthy, one that fails
 * now and then and sometimes answers too late, one down for a while) and a fault every few seconds
 * (an instance killed, Redis frozen or killed, PostgreSQL cut, slowed or a table locked, SQLite's
 * write lock held by another process). Every answer is checked as it comes; at the end, once the
 * faults stop and the deliveries catch up, the state every reader can see is checked against a
 * model of what the imports did. `runSoak` returns what broke a promise (`violations`) and what
 * happened (`counts`): test/faults/soak.test.ts runs it briefly on both stores, `npm run soak` for
 * as long as asked (docs/operations.md, "The soak").
 */

export interface SoakOptions {
  store: StoreName;
  /** How long the faults, imports, key cycles and clients run. */
  durationMs: number;
  /** A fault starts this often (each lasts a few seconds). */
  faultEveryMs?: number;
  importEveryMs?: number;
  keyCycleEveryMs?: number;
  /** Concurrent reading clients. */
  clients?: number;
  /** Hears a line per fault, import and phase. */
  progress?: (line: string) => void;
}

export interface SoakReport {
  violations: string[];
  counts: Record<string, number>;
}

/** One version of an incident in the model: `null` is deleted. */
interface Version {
  description: string | null;
  /** From when, and until when, a reader may see it (an import lands somewhere in between). */
  from: number;
  until: number;
}

const LIST = '/api/v1/public/incidents';
const RAW_KEY = /svc_[0-9a-f]{40}/;
const SIGNING_SECRET = /whsec_[A-Za-z0-9+/=]{20,}/;
/** The servers' WEBHOOK_TIMEOUT_MS. */
const WEBHOOK_TIMEOUT_MS = 5000;
/** How long after a fault ends its effects may still be seen (a reconnect, a probe, a lease). */
const FAULT_TAIL_MS = 4000;

interface Fault {
  name: string;
  start(): Promise<void>;
  end(): Promise<void>;
}

interface Delivery {
  webhookId: string;
  type: string;
  id: string;
  seq: number;
  description: string | null;
  /** When the receiver answered it (Date.now()). */
  at: number;
}

/**
 * The acknowledgments the store kept: the webhook-ids of the 2xx attempts in the delivery log,
 * which each worker writes in one transaction with its endpoint's position and what the receiver
 * now knows. An acknowledgment the receiver gave but the log never held was lost with an instance
 * (killed after the POST, before the write). Read every 250 ms, far more often than the log drops
 * an endpoint's attempts beyond its newest 1,000 or 4 MiB (an endpoint makes a few per second at most).
 */
class KeptAcknowledgments {
  readonly webhookIds = new Set<string>();
  /** The longest time between two reads that answered, in ms. */
  longestGapMs = 0;
  private lastId = 0;
  private running = true;
  private loop: Promise<void> = Promise.resolve();
  private readonly read: (after: number) => Promise<{ id: number; webhook_id: string }[]>;
  private readonly close: () => Promise<void>;

  constructor(store: StoreName, url: string) {
    const query =
      'select id, webhook_id from webhook_attempts where id > $after and status >= 200 and status < 300 order by id';
    if (store === 'sqlite') {
      const db = new SqliteDatabase(url.slice('sqlite:'.length), { readonly: true, fileMustExist: true });
      const statement = db.prepare<{ after: number }, { id: number; webhook_id: string }>(query);
      this.read = async (after) => statement.all({ after });
      this.close = async () => void db.close();
    } else {
      const client = new pg.Client({ connectionString: url });
      const connected = client.connect();
      this.read = async (after) => {
        await connected;
        return (
          await client.query<{ id: number; webhook_id: string }>(query.replace('$after', '$1'), [after])
        ).rows;
      };
      this.close = () => client.end();
    }
  }

  start(): void {
    this.loop = (async () => {
      let answeredAt = Date.now();
      while (this.running) {
        try {
          await this.poll();
          this.longestGapMs = Math.max(this.longestGapMs, Date.now() - answeredAt);
          answeredAt = Date.now();
        } catch {
          // Read again at the next turn; the gap is measured.
        }
        await sleep(250);
      }
    })();
  }

  private async poll(): Promise<void> {
    for (const row of await this.read(this.lastId)) {
      this.webhookIds.add(row.webhook_id);
      this.lastId = Math.max(this.lastId, Number(row.id));
    }
  }

  private stopped: Promise<void> | null = null;

  /** Stops reading, after one last read of everything kept by now. */
  stop(): Promise<void> {
    this.stopped ??= (async () => {
      this.running = false;
      await this.loop;
      try {
        await this.poll();
      } finally {
        await this.close();
      }
    })();
    return this.stopped;
  }
}

/** A webhook receiver of the soak's: records every event it acknowledged. */
class Receiver {
  readonly acked: Delivery[] = [];
  private readonly seen = new Set<string>();
  private server: Server | null = null;
  port = 0;

  readonly name: string;
  /** The answer to an attempt: a status, or 'late' (past the timeout). */
  private readonly answer: (firstAttempt: boolean) => number | 'late';

  constructor(name: string, answer: (firstAttempt: boolean) => number | 'late') {
    this.name = name;
    this.answer = answer;
  }

  async start(port?: number): Promise<void> {
    this.port = port ?? (await freePort());
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const webhookId = String(req.headers['webhook-id']);
        const outcome = this.answer(!this.seen.has(webhookId));
        this.seen.add(webhookId);
        if (outcome === 'late') {
          setTimeout(() => res.end('late'), WEBHOOK_TIMEOUT_MS + 1000).unref();
          return;
        }
        if (outcome >= 200 && outcome < 300) {
          const event = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
            type: string;
            data: { id: string; seq: number; object: { description?: string | null } | null };
          };
          if (event.type !== 'webhook.test') {
            this.acked.push({
              webhookId,
              type: event.type,
              id: event.data.id,
              seq: event.data.seq,
              description: event.data.object?.description ?? null,
              at: Date.now(),
            });
          }
        }
        res.statusCode = outcome;
        res.end();
      });
    });
    const server = this.server;
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (server === null) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/${this.name}`;
  }
}

export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const {
    store,
    durationMs,
    faultEveryMs = 5000,
    importEveryMs = 4000,
    keyCycleEveryMs = 3000,
    clients = 4,
    progress = () => {},
  } = options;
  const violations: string[] = [];
  const counts: Record<string, number> = {};
  const count = (what: string, n = 1) => {
    counts[what] = (counts[what] ?? 0) + n;
  };
  const violate = (what: string) => {
    if (violations.length < 200) violations.push(what);
  };
  const started = Date.now();
  const at = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;

  const database = await createTestDatabase(store);
  const work = mkdtempSync(join(tmpdir(), 'safety-api-soak-'));
  let redis: OwnRedis | null = null;
  const relay = store === 'postgres' ? await startRelay(database.url) : null;
  let kept: KeptAcknowledgments | null = null;
  const instances: (ServerProcess | null)[] = [null, null];
  const logs: string[] = [];
  const receivers = [
    new Receiver('steady', () => 204),
    new Receiver('flaky', (first) => {
      // A failure is never repeated for one event: its retry (about 5 s later) is answered.
      if (!first) return 200;
      // Each failure holds the endpoint about 5 s (the first retry): rare enough that it keeps up.
      const roll = Math.random();
      return roll < 0.01 ? 'late' : roll < 0.025 ? 500 : 200;
    }),
    new Receiver('sometimes-down', () => 200),
  ];

  try {
    if (store === 'postgres') redis = await startRedis();
    const cliEnv: Record<string, string> = {
      DATABASE_URL: database.url,
      WEBHOOKS_ALLOW_PRIVATE: 'true',
      ...(redis === null ? {} : { REDIS_URL: redis.url }),
    };
    const serverEnv: Record<string, string> = {
      ...cliEnv,
      DATABASE_URL: relay?.url ?? database.url,
      // Long enough that a receiver in a busy test process is not taken for a dead one (two
      // timeouts in a row would hold its endpoint 5 minutes); a killed instance's endpoints are
      // taken over once its leases run out.
      WEBHOOK_TIMEOUT_MS: String(WEBHOOK_TIMEOUT_MS),
      WEBHOOK_LEASE_SECONDS: String((2 * WEBHOOK_TIMEOUT_MS) / 1000),
      LOG_LEVEL: 'info',
    };
    const cli = (args: string[]) => runCli(args, cliEnv);

    // The account, its people and places, and 150 incidents; the model learns them from the file.
    const model = new Map<string, Version[]>();
    const seed = join(work, 'seed.ndjson');
    const seedRecords = [
      ...demoRecords({ incidents: 150, rateLimitPerHour: 1_000_000_000, now: new Date('2026-01-01Z') }),
    ];
    await writeNdjson(seed, seedRecords);
    const seeded = await cli(['import', seed]);
    if (seeded.code !== 0) throw new Error(`seed import failed: ${seeded.stderr}`);
    for (const record of seedRecords) {
      if (record.type !== 'incident') continue;
      const description = typeof record.description === 'string' ? record.description : null;
      model.set(String(record.id), [{ description, from: 0, until: Number.POSITIVE_INFINITY }]);
    }
    const liveAtStart = [...model.keys()];
    const created = await cli(['keys', 'create', '--account', DEMO_ACCOUNT_ID, '--name', 'soak', '--json']);
    const key = (JSON.parse(created.stdout) as { key: string }).key;
    const auth = { authorization: `Bearer ${key}` };

    for (const receiver of receivers) await receiver.start();
    const endpointSecrets: string[] = [];
    for (const receiver of receivers) {
      const made = await cli([
        'webhooks',
        'create',
        '--account',
        DEMO_ACCOUNT_ID,
        '--url',
        receiver.url,
        '--json',
      ]);
      if (made.code !== 0) throw new Error(`webhooks create failed: ${made.stderr}`);
      endpointSecrets.push((JSON.parse(made.stdout) as { secret: string }).secret);
    }
    kept = new KeptAcknowledgments(store, database.url);
    kept.start();

    const startInstance = async (i: number) => {
      instances[i] = await startServer(serverEnv);
    };
    const killInstance = (i: number) => {
      const instance = instances[i];
      instances[i] = null;
      if (instance === null || instance === undefined) return;
      logs.push(instance.logs());
      instance.signal('SIGKILL');
    };
    await startInstance(0);
    await startInstance(1);

    // The faults, each a window in which its effects are allowed.
    const windows: { name: string; from: number; until: number }[] = [];
    const inFault = (from: number, until: number) =>
      windows.some((w) => w.from <= until && w.until + FAULT_TAIL_MS >= from);
    const instanceKill = (i: number): Fault => ({
      name: `instance ${i === 0 ? 'A' : 'B'} killed (SIGKILL) and started again`,
      start: async () => killInstance(i),
      end: () => startInstance(i),
    });
    let sqliteLocker: SqliteDatabase.Database | null = null;
    let pgLocker: pg.Client | null = null;
    const faults: Fault[] =
      store === 'postgres'
        ? [
            instanceKill(0),
            {
              name: 'Redis frozen (SIGSTOP)',
              start: async () => void redis?.process.kill('SIGSTOP'),
              end: async () => void redis?.process.kill('SIGCONT'),
            },
            {
              name: 'PostgreSQL connections cut',
              start: async () => relay?.cut(),
              end: async () => relay?.heal(),
            },
            {
              name: 'incidents locked (ACCESS EXCLUSIVE)',
              start: async () => {
                pgLocker = new pg.Client({ connectionString: database.url });
                await pgLocker.connect();
                await pgLocker.query('begin; lock table incidents in access exclusive mode');
              },
              end: async () => {
                await pgLocker?.query('rollback');
                await pgLocker?.end();
                pgLocker = null;
              },
            },
            instanceKill(1),
            {
              name: 'Redis killed and started again, empty',
              start: async () => {
                const port = redis?.port;
                await redis?.stop();
                redis = null;
                await sleep(500);
                redis = await startRedis({ port });
              },
              end: async () => {},
            },
            {
              name: 'PostgreSQL slowed (300 ms each way)',
              start: async () => relay?.slow(300),
              end: async () => relay?.slow(0),
            },
          ]
        : [
            instanceKill(0),
            {
              name: "SQLite's write lock held by another process",
              start: async () => {
                sqliteLocker = new SqliteDatabase(database.url.slice('sqlite:'.length));
                sqliteLocker.exec('BEGIN IMMEDIATE');
              },
              end: async () => {
                sqliteLocker?.exec('ROLLBACK');
                sqliteLocker?.close();
                sqliteLocker = null;
              },
            },
            instanceKill(1),
          ];

    // The soak runs for `durationMs`, and on until it has done what it is for (on a busy machine a
    // CLI call can take seconds): every fault once, four imports, two key cycles; at most 4× as long.
    const stopAt = Date.now() + durationMs;
    const giveUpAt = Date.now() + 4 * durationMs;
    const done = () =>
      (counts.faults ?? 0) >= faults.length && (counts.imports ?? 0) >= 4 && (counts['key cycles'] ?? 0) >= 2;
    const running = () => Date.now() < giveUpAt && (Date.now() < stopAt || !done());
    const alive = () => instances.filter((i): i is ServerProcess => i !== null);
    const anyInstance = () => {
      const up = alive();
      return up[Math.floor(Math.random() * up.length)] ?? null;
    };

    /** Calls an instance; null when it is not there (killed, restarting). */
    const call = async (instance: ServerProcess, path: string, headers: Record<string, string> = auth) => {
      const sent = Date.now();
      try {
        const res = await fetch(`${instance.url}${path}`, { headers, signal: AbortSignal.timeout(15_000) });
        const body = await res.text();
        const received = Date.now();
        if (res.status >= 500 && res.status !== 503) violate(`${at()}: ${res.status} for ${path}: ${body}`);
        if (res.status === 503) {
          count('503');
          if (!inFault(sent, received)) count('503 outside faults');
          if (!/^[1-9][0-9]*$/.test(res.headers.get('retry-after') ?? ''))
            violate(`${at()}: 503 without Retry-After for ${path}`);
        }
        if (received - sent > 3000 + 1500)
          violate(`${at()}: ${path} answered after ${received - sent} ms (${res.status})`);
        return { status: res.status, body, sent, received, headers: res.headers };
      } catch {
        count('connection failures (instance down)');
        return null;
      }
    };

    const acceptable = (id: string, description: string | null, from: number, until: number) =>
      (model.get(id) ?? []).some((v) => v.description === description && v.from <= until && v.until >= from);

    // Clients: reads by id (checked against the model) and page 1.
    const ids = () => [...model.keys()];
    const reader = async () => {
      while (running()) {
        const instance = anyInstance();
        if (instance === null) {
          await sleep(50);
          continue;
        }
        if (Math.random() < 0.7) {
          const all = ids();
          const id = all[Math.floor(Math.random() * all.length)] as string;
          const res = await call(instance, `${LIST}/${id}`);
          if (res === null) continue;
          count('reads by id');
          if (res.status === 200) {
            const { description } = (JSON.parse(res.body) as { data: { description: string | null } }).data;
            if (!acceptable(id, description, res.sent, res.received))
              violate(`${at()}: incident ${id} read as "${description}", not a version it had`);
          } else if (res.status === 404) {
            if (!acceptable(id, null, res.sent, res.received))
              violate(`${at()}: incident ${id} answered 404 while it existed`);
          } else if (res.status !== 503) violate(`${at()}: read by id answered ${res.status}`);
        } else {
          const res = await call(instance, `${LIST}?limit=20&page=${1 + Math.floor(Math.random() * 3)}`);
          if (res === null) continue;
          count('pages');
          if (res.status !== 200 && res.status !== 503) violate(`${at()}: page answered ${res.status}`);
        }
      }
    };

    // A follower of the changes feed, from the head at the start.
    const followed = new Map<string, string | null>();
    let cursor = 'latest';
    const follow = async (untilCaughtUp: boolean) => {
      for (;;) {
        const instance = anyInstance();
        if (instance === null) {
          await sleep(100);
          continue;
        }
        const res = await call(instance, `/api/v1/public/changes?limit=200&cursor=${cursor}`);
        if (res === null || res.status === 503) {
          await sleep(200);
          continue;
        }
        if (res.status !== 200) {
          violate(`${at()}: changes answered ${res.status}: ${res.body}`);
          return;
        }
        const page = (
          JSON.parse(res.body) as {
            data: {
              data: {
                type: string;
                op: string;
                id: string;
                object: { description?: string | null } | null;
              }[];
              next_cursor: string;
              has_more: boolean;
            };
          }
        ).data;
        for (const change of page.data) {
          if (change.type !== 'incident') continue;
          followed.set(change.id, change.op === 'delete' ? null : (change.object?.description ?? null));
        }
        cursor = page.next_cursor;
        count('feed pages');
        if (untilCaughtUp ? !page.has_more : !running()) return;
        if (!page.has_more) await sleep(300);
      }
    };

    // Imports: new incidents, updates, deletions and deleted ids brought back.
    let imports = 0;
    const deleted: string[] = [];
    const importer = async () => {
      while (running()) {
        await sleep(importEveryMs);
        imports += 1;
        const live = [...model.entries()].filter(([, v]) => v.at(-1)?.description !== null).map(([id]) => id);
        const pick = (from: string[], n: number) =>
          from.sort(() => Math.random() - 0.5).slice(0, Math.min(n, from.length));
        const changes = new Map<string, string | null>();
        for (let i = 0; i < 20; i += 1) changes.set(randomUUID(), `i${imports}`);
        for (const id of pick(live, 10)) changes.set(id, `i${imports}`);
        for (const id of pick(live, 5)) if (!changes.has(id)) changes.set(id, null);
        for (const id of pick(deleted, 3)) changes.set(id, `back ${imports}`);
        const file = join(work, `import-${imports}.ndjson`);
        let n = 0;
        await writeNdjson(
          file,
          [...changes].map(([id, description]) => {
            n += 1;
            return description === null
              ? { type: 'incident', id, account_id: DEMO_ACCOUNT_ID, deleted: true }
              : {
                  type: 'incident',
                  id,
                  account_id: DEMO_ACCOUNT_ID,
                  incident_number: `INC-2027-${String(imports * 1000 + n).padStart(6, '0')}`,
                  status: 'open',
                  description,
                  created_at: new Date(Date.UTC(2026, 6, 1) + imports * 60_000 + n * 1000).toISOString(),
                };
          }),
        );
        // While the import runs, a reader may see each record as it was or as it will be.
        const from = Date.now();
        const before = new Map<string, Version>();
        for (const [id, description] of changes) {
          const versions = model.get(id) ?? [{ description: null, from: 0, until: Number.POSITIVE_INFINITY }];
          before.set(id, versions.at(-1) as Version);
          versions.push({ description, from, until: Number.POSITIVE_INFINITY });
          model.set(id, versions);
        }
        const result = await cli(['import', file]);
        const until = Date.now();
        count('imports');
        if (result.code !== 0) {
          violate(`${at()}: import ${imports} failed: ${result.stderr.trim()}`);
          for (const id of changes.keys()) model.get(id)?.pop();
          continue;
        }
        for (const [id, description] of changes) {
          (before.get(id) as Version).until = until;
          if (description === null) deleted.push(id);
          else if (deleted.includes(id)) deleted.splice(deleted.indexOf(id), 1);
        }
        progress(`${at()}: import ${imports} (${changes.size} records) in ${until - from} ms`);
      }
    };

    // API keys created, disabled, enabled and revoked from the CLI: each step holds on every
    // instance at once, and a CLI command reports what it did whatever happens to Redis.
    const keyCycler = async () => {
      let cycle = 0;
      while (running()) {
        await sleep(keyCycleEveryMs);
        cycle += 1;
        const made = await cli([
          'keys',
          'create',
          '--account',
          DEMO_ACCOUNT_ID,
          '--name',
          `cycle ${cycle}`,
          '--json',
        ]);
        if (made.code !== 0 || !RAW_KEY.test(made.stdout)) {
          violate(`${at()}: keys create exited ${made.code} without the key: ${made.stderr.trim()}`);
          continue;
        }
        const { id, key: raw } = JSON.parse(made.stdout) as { id: string; key: string };
        const expect = async (step: string, usable: boolean) => {
          for (const instance of alive()) {
            const res = await call(instance, `${LIST}?limit=1`, { authorization: `Bearer ${raw}` });
            if (res === null || res.status === 503) continue;
            count('key checks');
            if (usable ? res.status !== 200 : res.status !== 401)
              violate(`${at()}: key ${step}: answered ${res.status} (${res.body.slice(0, 80)})`);
          }
        };
        await expect('created', true);
        for (const [step, usable] of [
          ['disable', false],
          ['enable', true],
          ['revoke', false],
        ] as const) {
          const done = await cli(['keys', step, id]);
          if (done.code !== 0) {
            violate(`${at()}: keys ${step} exited ${done.code}: ${done.stderr.trim()}`);
            break;
          }
          await expect(`${step}d`, usable);
        }
        count('key cycles');
      }
    };

    const faulter = async () => {
      let next = 0;
      while (running()) {
        await sleep(faultEveryMs - 2500);
        if (!running()) break;
        const fault = faults[next % faults.length] as Fault;
        next += 1;
        const window = { name: fault.name, from: Date.now(), until: Number.POSITIVE_INFINITY };
        windows.push(window);
        progress(`${at()}: fault: ${fault.name}`);
        await fault.start();
        await sleep(2500);
        await fault.end();
        window.until = Date.now();
        count('faults');
      }
    };
    // The receiver that is sometimes down: down once, for 3 s, in the middle.
    const outage = async () => {
      await sleep(durationMs / 2);
      const receiver = receivers[2] as Receiver;
      const port = receiver.port;
      await receiver.stop();
      progress(`${at()}: receiver ${receiver.name} down`);
      await sleep(3000);
      await receiver.start(port);
    };

    await Promise.all([
      ...Array.from({ length: clients }, reader),
      follow(false),
      importer(),
      keyCycler(),
      faulter(),
      outage(),
    ]);
    progress(`${at()}: faults over; waiting for deliveries to catch up`);

    // Everything settles: both instances up, every endpoint caught up.
    for (let i = 0; i < instances.length; i += 1) if (instances[i] === null) await startInstance(i);
    const caughtUp = Date.now() + 90_000;
    for (;;) {
      const listed = await cli(['webhooks', 'list', '--account', DEMO_ACCOUNT_ID, '--json']);
      const endpoints =
        listed.code === 0 ? (JSON.parse(listed.stdout) as { lag: number; state: string }[]) : [];
      if (
        endpoints.length === receivers.length &&
        endpoints.every((e) => e.lag === 0 && e.state === 'active')
      )
        break;
      if (Date.now() > caughtUp) {
        violate(`webhooks did not catch up within 90 s: ${listed.stdout}`);
        break;
      }
      await sleep(500);
    }
    await follow(true);
    await kept.stop();
    const keptIds = kept.webhookIds;
    count('longest wait for the delivery log (ms)', kept.longestGapMs);
    // Past about 10 s, an endpoint could have made more attempts than the log keeps between two
    // reads: an acknowledgment the store kept could then go unseen and excuse a wrong type.
    if (kept.longestGapMs > 10_000) violate(`the delivery log went unread for ${kept.longestGapMs} ms`);

    // The final state, as every reader sees it.
    const final = new Map([...model].map(([id, versions]) => [id, versions.at(-1)?.description ?? null]));
    for (const instance of alive()) {
      for (const [id, description] of final) {
        const res = await call(instance, `${LIST}/${id}`);
        const seen =
          res?.status === 200
            ? (JSON.parse(res.body) as { data: { description: string | null } }).data.description
            : res?.status === 404
              ? null
              : `status ${res?.status}`;
        if (seen !== description)
          violate(`final: incident ${id} is "${seen}" on ${instance.url}, not "${description}"`);
        count('final reads');
      }
      const page = await call(instance, `${LIST}?limit=1`);
      const total =
        page?.status === 200
          ? (JSON.parse(page.body) as { data: { pagination: { total: number } } }).data.pagination.total
          : -1;
      const live = [...final.values()].filter((d) => d !== null).length;
      if (total !== live) violate(`final: total ${total} on ${instance.url}, not ${live}`);
    }
    const exported = await call(alive()[0] as ServerProcess, '/api/v1/public/exports/incidents.ndjson');
    if (exported?.status === 200) {
      const rows = exported.body
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { id: string; description: string | null });
      const live = new Map([...final].filter(([, d]) => d !== null));
      if (rows.length !== live.size)
        violate(`final: the export has ${rows.length} incidents, not ${live.size}`);
      for (const row of rows)
        if (live.get(row.id) !== row.description)
          violate(`final: export row ${row.id} is "${row.description}"`);
    } else violate(`final: the export answered ${exported?.status}`);
    for (const [id, description] of followed) {
      if (final.get(id) !== description)
        violate(`feed: ${id} ended as "${description}", not "${final.get(id)}"`);
    }
    for (const [id, versions] of model) {
      if (versions.length > 1 && !followed.has(id)) violate(`feed: ${id} changed but never came in the feed`);
    }
    count('records followed', followed.size);

    // What each receiver acknowledged: in order, typed by what it had been sent, ending right.
    const leftTheView = (id: string) => {
      const versions = model.get(id) ?? [];
      const first = versions.findIndex((v) => v.description !== null);
      return first >= 0 && versions.slice(first + 1).some((v) => v.description === null);
    };
    for (const receiver of receivers) {
      // What was in the view when the endpoints were made counts as known to each receiver.
      const known = new Set(liveAtStart);
      const last = new Map<string, string | null>();
      const done = new Set<string>();
      const lastOf = new Map<string, Delivery>();
      let lastRepeatAt = 0;
      const when = (ms: number) => `${((ms - started) / 1000).toFixed(1)} s`;
      let lastSeq = 0;
      /**
       * Whether the store knows that the receiver holds each record: it held it from the start, or
       * the delivery log (written in one transaction with the position and what the receiver
       * knows) kept an acknowledgment of one of its events since it last entered the view. Where
       * not, every such acknowledgment was lost with an instance killed before it wrote it.
       * (A repeat of an earlier event coming after one is no proof of that: the repeat may have
       * been kept, and the acknowledgment with it.)
       */
      const storeKnows = new Map(liveAtStart.map((id) => [id, true]));
      const ackLost = (id: string) => storeKnows.get(id) !== true;
      for (const delivery of receiver.acked) {
        // A repeat of an acknowledged event (an instance killed before it wrote the position) is
        // the same event: at least once, with the same webhook-id.
        if (done.has(delivery.webhookId)) {
          count(`${receiver.name}: repeats after a 2xx`);
          lastRepeatAt = delivery.at;
          continue;
        }
        done.add(delivery.webhookId);
        if (delivery.seq <= lastSeq) violate(`${receiver.name}: seq ${delivery.seq} after ${lastSeq}`);
        lastSeq = delivery.seq;
        const [kind, action] = delivery.type.split('.');
        if (kind !== 'incident') continue;
        if (action === 'updated' && !known.has(delivery.id))
          violate(`${receiver.name}: incident.updated for ${delivery.id}, which it was never sent`);
        // Created again for a record it holds: right only if the record left the view and came
        // back meanwhile (the deletion compacted away before it was sent), or if the endpoint lost
        // its acknowledgment (an instance killed before it wrote it) and the record changed before
        // the resend reached it: its latest change is then sent as created (docs/webhooks.md).
        if (
          action === 'created' &&
          known.has(delivery.id) &&
          !leftTheView(delivery.id) &&
          !ackLost(delivery.id)
        )
          violate(
            `${receiver.name}: incident.created for ${delivery.id}, which it holds ` +
              `(seq ${delivery.seq} at ${when(delivery.at)}; its last acknowledged event was seq ${lastOf.get(delivery.id)?.seq} ` +
              `${lastOf.get(delivery.id)?.type} at ${when(lastOf.get(delivery.id)?.at ?? started)}; last repeat after a 2xx at ${when(lastRepeatAt || started)})`,
          );
        if (action === 'deleted') {
          known.delete(delivery.id);
          storeKnows.delete(delivery.id);
        } else {
          known.add(delivery.id);
          storeKnows.set(
            delivery.id,
            storeKnows.get(delivery.id) === true || keptIds.has(delivery.webhookId),
          );
        }
        last.set(delivery.id, action === 'deleted' ? null : delivery.description);
        lastOf.set(delivery.id, delivery);
      }
      for (const [id, versions] of model) {
        if (versions.length < 2) continue;
        const expected = final.get(id) ?? null;
        if ((last.get(id) ?? null) !== expected || !last.has(id))
          violate(`${receiver.name}: last event of ${id} left it "${last.get(id)}", not "${expected}"`);
      }
      count(`${receiver.name}: events`, done.size);
    }

    // The logs: no secret, and no outage outside a fault.
    for (const instance of alive()) logs.push(instance.logs());
    const text = logs.join('\n');
    if (RAW_KEY.test(text)) violate('logs: a raw API key');
    if (SIGNING_SECRET.test(text) || endpointSecrets.some((secret) => text.includes(secret)))
      violate('logs: a webhook signing secret');
    for (const line of text.split('\n')) {
      let entry: {
        time: number;
        level: number;
        msg?: string;
        operation?: string;
        err?: { type?: string; message?: string };
      };
      try {
        entry = JSON.parse(line) as typeof entry;
      } catch {
        // Not a log line (a killed instance's last, cut short; an empty one).
        continue;
      }
      // An error line is a failure the service did not expect: what it was, for the report.
      if (entry.level >= 50)
        violate(
          `logs: ${entry.msg ?? ''}: ${entry.err?.type ?? ''} ${entry.err?.message ?? ''}`.slice(0, 400),
        );
      if (entry.msg?.startsWith('store unavailable') !== true) continue;
      count('store outages logged');
      if (entry.operation === undefined) violate(`logs: a store outage that names no operation: ${line}`);
      if (!inFault(entry.time, entry.time)) violate(`logs: a store outage outside any fault: ${line}`);
    }
    count('log lines', text.split('\n').length);
    return { violations, counts };
  } finally {
    await kept?.stop().catch(() => {});
    for (let i = 0; i < instances.length; i += 1) await instances[i]?.stop();
    for (const receiver of receivers) await receiver.stop();
    await redis?.stop();
    await relay?.close();
    await database.drop();
    rmSync(work, { recursive: true, force: true });
  }
}
