import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { DEMO_ACCOUNT_ID } from '../../src/demo/demo-data.ts';
import { type Api, nextPort, startApi } from '../api.ts';
import { accountDataset, importFile, incidentsDataset } from '../data.ts';
import { get } from '../http.ts';
import { type HeapReading, heapAfterFullGc } from '../inspector.ts';
import { cli, cpuMicros, memoryMb, pinned, sampleMemory, stop } from '../processes.ts';
import { addRow, fmt, log, median, percentile, spread } from '../report.ts';
import { ROOT, settings } from '../settings.ts';
import type { EndpointStats, ReceiverRequest } from '../webhook-receiver.ts';
import { failures, type LoadResult, load } from '../wrk.ts';
import { PAGE_ONE } from './ratio.ts';

/**
 * Webhook deliveries (docs/performance.md, "Webhooks"), on one store: the real server
 * (`safety-api serve`) delivers the demo account's changes to endpoints made by the real CLI
 * (`safety-api webhooks create`), for changes made by the real CLI (`safety-api import`), to
 * bench/webhook-receiver.ts, a bare node:http receiver in a process of its own (on the load
 * generator's CPUs) that answers 204 and checks every event's seq. Four measurements, in this order:
 *
 * 1. Throughput to one endpoint: `settings.webhookEvents` incidents in one import, first to last
 *    receipt; every seq the feed holds must arrive once, in order.
 * 2. Latency: `settings.webhookSingles` one-incident imports in a row, each waited for, from the
 *    change's `changed_at` (its commit, within a millisecond or two) to its receipt.
 * 3. Page 1 under wrk while the server delivers a backlog to that endpoint, against page 1 idle,
 *    in alternating rounds.
 * 4. Fan-out: the endpoint deleted, `settings.webhookEndpoints` endpoints on the account (each its
 *    own receiver port), `settings.webhookFanOutEvents` incidents in one import, every event to every
 *    endpoint, with the server's RSS sampled against the events delivered.
 */

/** A delivery that makes no progress for this long has stalled: the bench stops and says so. */
const STALL_MS = 30_000;
/** The share of page 1's idle throughput the API must keep while it delivers. */
const WHILE_DELIVERING_TARGET = 0.9;
/** The one-endpoint throughput target, events per second. */
const EVENTS_PER_SECOND_TARGET = 1000;
/** The commit-to-receipt target for single changes, p99, in ms. */
const LATENCY_P99_TARGET_MS = 1000;
/**
 * "Flat" memory: over the second half of the fan-out's deliveries the RSS grows by less than this
 * share, and so does what is alive after a full GC (halfway to the end). A leak grows with the
 * events delivered; the first half is left out because V8 grows its heap to a working size then,
 * with garbage that a full collection gives back (the row shows the RSS after one).
 */
const FLAT_SHARE = 0.1;
/** Endpoints made at once by `webhooks create` processes for the fan-out. */
const CREATE_CONCURRENCY = 4;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

/** Delivery stopped short: the receiver got no event for STALL_MS. */
class StallError extends Error {
  override name = 'StallError';
}

type Request = ReceiverRequest extends infer R ? (R extends unknown ? Omit<R, 'id'> : never) : never;

/** bench/webhook-receiver.ts in a process of its own, asked over IPC. */
class Receiver {
  private nextId = 0;
  private readonly pending = new Map<number, { resolve(reply: unknown): void; reject(e: Error): void }>();

  readonly child: ChildProcess & { pid: number };
  readonly ports: number[];

  private constructor(child: ChildProcess & { pid: number }, ports: number[]) {
    this.child = child;
    this.ports = ports;
    child.on('message', (message: { id?: number }) => {
      if (message.id === undefined) return;
      this.pending.get(message.id)?.resolve(message);
      this.pending.delete(message.id);
    });
    child.on('exit', (code) => {
      for (const waiter of this.pending.values())
        waiter.reject(new Error(`the webhook receiver exited (${code})`));
      this.pending.clear();
    });
  }

  /** Starts a receiver with `endpoints` ports, on the load generator's CPUs. */
  static async start(endpoints: number): Promise<Receiver> {
    const [command, args] = pinned('loadGenerator', process.execPath, [
      join(ROOT, 'bench/webhook-receiver.ts'),
      String(endpoints),
    ]);
    const child = spawn(command, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const [ready] = (await Promise.race([
      once(child, 'message'),
      once(child, 'exit').then(() => {
        throw new Error('the webhook receiver did not start');
      }),
    ])) as [{ ports: number[] }];
    return new Receiver(child as ChildProcess & { pid: number }, ready.ports);
  }

  url(endpoint: number): string {
    return `http://127.0.0.1:${this.ports[endpoint]}/hooks/${endpoint}`;
  }

  ask<T>(request: Request): Promise<T> {
    const id = (this.nextId += 1);
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (reply: unknown) => void, reject });
      this.child.send({ ...request, id });
    });
  }

  async stats(): Promise<EndpointStats[]> {
    return (await this.ask<{ stats: EndpointStats[] }>({ cmd: 'stats' })).stats;
  }

  /** Resolves once the receiver holds `distinct` events in all; fails when delivery stalls. */
  async delivered(distinct: number, what: string): Promise<EndpointStats[]> {
    let seen = -1;
    let progressAt = performance.now();
    for (;;) {
      const reply = await this.ask<{ stats: EndpointStats[]; timedOut?: boolean }>({
        cmd: 'waitFor',
        distinct,
        timeoutMs: 5000,
      });
      if (reply.timedOut !== true) return reply.stats;
      const now = sum(reply.stats.map((s) => s.distinct));
      if (now > seen) {
        seen = now;
        progressAt = performance.now();
      } else if (performance.now() - progressAt > STALL_MS) {
        throw new StallError(
          `${what}: the receiver got ${fmt(now)} of ${fmt(distinct)} events, then none for ${STALL_MS / 1000} s`,
        );
      }
    }
  }

  close(): void {
    if (this.child.connected) this.child.disconnect();
  }
}

interface Context {
  label: string;
  env: Record<string, string>;
  api: Api;
  /** The server's inspector port (`--inspect`): its heap, after a full collection. */
  inspectPort: number;
  receiver: Receiver;
  /** A /changes cursor at the last change the scenario has accounted for. */
  cursor: string;
}

/** The seqs of the account's changes after `cursor`, from the API's own feed, and the cursor after them. */
async function feedSeqs(api: Api, cursor: string): Promise<{ seqs: number[]; cursor: string }> {
  const seqs: number[] = [];
  for (;;) {
    const res = await get(
      api.port,
      `/api/v1/public/changes?limit=1000&cursor=${encodeURIComponent(cursor)}`,
      api.auth,
    );
    if (res.status !== 200) throw new Error(`the changes feed answered ${res.status}`);
    const page = JSON.parse(res.body.toString('utf8')).data as {
      data: { seq: number }[];
      next_cursor: string;
      has_more: boolean;
    };
    for (const change of page.data) seqs.push(change.seq);
    cursor = page.next_cursor;
    if (!page.has_more) return { seqs, cursor };
  }
}

/**
 * Whether the first `endpoints` endpoints each got exactly the seqs the feed holds after
 * `ctx.cursor` (which then moves past them), with no first arrival out of order; in words.
 */
async function checkSeqs(ctx: Context, endpoints: number): Promise<{ ok: boolean; text: string }> {
  const feed = await feedSeqs(ctx.api, ctx.cursor);
  ctx.cursor = feed.cursor;
  const { checks } = await ctx.receiver.ask<{
    checks: { missing: number; unexpected: number; firstMissing: number[] }[];
  }>({ cmd: 'check', expected: feed.seqs });
  const stats = (await ctx.receiver.stats()).slice(0, endpoints);
  const used = checks.slice(0, endpoints);
  const missing = sum(used.map((c) => c.missing));
  const unexpected = sum(used.map((c) => c.unexpected));
  const outOfOrder = sum(stats.map((s) => s.outOfOrder));
  const repeats = sum(stats.map((s) => s.duplicates));
  const ok = missing === 0 && unexpected === 0 && outOfOrder === 0;
  const each = endpoints > 1 ? ' at each endpoint' : '';
  const text = ok
    ? `all ${fmt(feed.seqs.length)} seqs of the feed${each}, in order, ${repeats === 0 ? 'no repeats' : `${fmt(repeats)} repeats`}`
    : `${fmt(missing)} seqs MISSING (first ${used
        .flatMap((c) => c.firstMissing)
        .slice(0, 5)
        .join(', ')}), ` +
      `${fmt(unexpected)} unexpected, ${fmt(outOfOrder)} out of order, ${fmt(repeats)} repeats, of ${fmt(feed.seqs.length)}${each}`;
  return { ok, text };
}

/** The server's /metrics, as lines. */
async function metrics(api: Api): Promise<string[]> {
  return (await get(api.port, '/metrics')).body.toString('utf8').split('\n');
}

/** Waits until the server delivers for exactly `count` endpoints (one lag series each in /metrics). */
async function waitHeld(api: Api, count: number): Promise<void> {
  let held = 0;
  for (let i = 0; i < 300; i += 1) {
    held = (await metrics(api)).filter((l) => l.startsWith('webhook_endpoint_lag_events{')).length;
    if (held === count) return;
    await sleep(100);
  }
  throw new Error(`the server holds ${held} webhook endpoints, not ${count}`);
}

/** `webhook_delivery_attempts_total` by outcome, now. */
async function attempts(api: Api): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const line of await metrics(api)) {
    const match = /^webhook_delivery_attempts_total\{outcome="(\w+)"\} (\d+)/.exec(line);
    if (match !== null) counts.set(match[1] as string, Number(match[2]));
  }
  return counts;
}

/** The attempts made between two readings, as "N, all 2xx" or "N, of which 3 failed (timeout 3)". */
function describeAttempts(
  before: Map<string, number>,
  after: Map<string, number>,
): { failed: number; text: string } {
  const made = [...after].map(([outcome, n]): [string, number] => [outcome, n - (before.get(outcome) ?? 0)]);
  const failed = made.filter(([outcome, n]) => outcome !== 'success' && n > 0);
  const failedCount = sum(failed.map(([, n]) => n));
  return {
    failed: failedCount,
    text: `${fmt(sum(made.map(([, n]) => n)))} attempts${failedCount === 0 ? ', all 2xx' : `, ${fmt(failedCount)} failed (${failed.map(([o, n]) => `${o} ${n}`).join(', ')})`}`,
  };
}

async function createEndpoint(
  env: Record<string, string>,
  url: string,
): Promise<{ id: string; cursor: string }> {
  const created = await cli(
    ['webhooks', 'create', '--account', DEMO_ACCOUNT_ID, '--url', url, '--json'],
    env,
  );
  return JSON.parse(created.stdout) as { id: string; cursor: string };
}

const cpuPercent = (cpuUs: number, ms: number) => (cpuUs / (ms * 1000)) * 100;

/**
 * The server's and the receiver's CPU time from the first receipt after the import (or from the
 * import's exit, when events were flowing before it) to the last: per event, and as a share of a
 * core. `distinct`: the events the receiver must hold in all at the end.
 */
async function deliveryCost(ctx: Context, distinct: number, what: string) {
  const { api, receiver } = ctx;
  const first = await receiver.delivered(1, what);
  const startedWith = sum(first.map((s) => s.distinct));
  const cpuBefore = cpuMicros(api.pid);
  const receiverCpuBefore = cpuMicros(receiver.child.pid);
  const started = performance.now();
  const stats = await receiver.delivered(distinct, what);
  const ms = performance.now() - started;
  const cpu = cpuMicros(api.pid) - cpuBefore;
  const receiverCpu = cpuMicros(receiver.child.pid) - receiverCpuBefore;
  const events = Math.max(1, distinct - startedWith);
  return {
    stats,
    serverUs: cpu / events,
    serverPercent: cpuPercent(cpu, ms),
    receiverUs: receiverCpu / events,
    receiverPercent: cpuPercent(receiverCpu, ms),
  };
}

/** 1. One import of `settings.webhookEvents` incidents to one endpoint: events/s; returns it. */
async function throughput(ctx: Context): Promise<number> {
  const { label, env, api, receiver } = ctx;
  const events = settings.webhookEvents;
  const file = await incidentsDataset(`webhooks-${api.port}-import.ndjson`, events);
  await receiver.ask({ cmd: 'reset' });
  log(`${label}: webhooks: importing ${fmt(events)} incidents, delivered to one endpoint`);
  const before = await attempts(api);
  const rssBefore = memoryMb(api.pid, 'VmRSS');
  const imported = await importFile(file, env);
  const importEnd = Date.now();
  const cost = await deliveryCost(ctx, events, 'one endpoint');
  const stats = cost.stats[0] as EndpointStats;
  const rssAfter = memoryMb(api.pid, 'VmRSS');
  const seqs = await checkSeqs(ctx, 1);
  const made = describeAttempts(before, await attempts(api));
  const ms = stats.lastAt - stats.firstAt;
  const rate = (stats.distinct / ms) * 1000;
  addRow({
    measurement: `${label}: webhooks: ${fmt(events)} incidents in one CLI import, to one receiver (204 at once), first to last receipt`,
    result:
      `${fmt(stats.distinct)} events in ${fmt(ms / 1000, 1)} s = ${fmt(rate)} events/s; ` +
      `first receipt ${fmt((stats.firstAt - importEnd) / 1000, 2)} s and last ${fmt((stats.lastAt - importEnd) / 1000, 1)} s after the CLI exited ` +
      `(import ${fmt(imported.seconds, 1)} s); ${seqs.text}; ${made.text}`,
    target: `>= ${fmt(EVENTS_PER_SECOND_TARGET)} events/s, every seq once, in order`,
    pass: seqs.ok && made.failed === 0 && rate >= EVENTS_PER_SECOND_TARGET,
  });
  addRow({
    measurement: `${label}: webhooks: CPU per event while delivering those, server and receiver`,
    result:
      `server ${fmt(cost.serverUs)} µs an event, at ${fmt(cost.serverPercent)}% of a core; ` +
      `receiver ${fmt(cost.receiverUs)} µs (${fmt(cost.receiverPercent)}%); server RSS ${fmt(rssBefore)} → ${fmt(rssAfter)} MB`,
    target: 'report',
    pass: null,
  });
  return rate;
}

/** 2. `settings.webhookSingles` one-incident imports in a row: commit-to-receipt latency. */
async function latency(ctx: Context): Promise<void> {
  const { label, env, api, receiver } = ctx;
  const count = settings.webhookSingles;
  const files: string[] = [];
  for (let i = 0; i < count; i += 1)
    files.push(await incidentsDataset(`webhooks-${api.port}-single-${i}.ndjson`, 1));
  await receiver.ask({ cmd: 'reset' });
  log(`${label}: webhooks: ${count} one-incident imports in a row, each waited for at the receiver`);
  const exits: number[] = [];
  const runs: number[] = [];
  for (const [i, file] of files.entries()) {
    runs.push((await importFile(file, env)).seconds * 1000);
    exits.push(Date.now());
    await receiver.delivered(i + 1, `single change ${i + 1}`);
  }
  const events = await receiver.ask<{ seqs: number[]; times: number[]; latencies: number[] }>({
    cmd: 'events',
    endpoint: 0,
  });
  const seqs = await checkSeqs(ctx, 1);
  // The commit lies between the two: changed_at is stamped when the import begins its write (before
  // the commit), and the CLI exits after it.
  const fromChangedAt = events.latencies;
  const fromExit = events.times.map((at, i) => at - (exits[i] as number));
  const stampToExit = events.times.map(
    (at, i) => (exits[i] as number) - (at - (events.latencies[i] as number)),
  );
  const describe = (values: number[]) =>
    `p50 ${fmt(percentile(values, 50))} ms, p99 ${fmt(percentile(values, 99))} ms, max ${fmt(Math.max(...values))} ms`;
  const p99 = percentile(fromChangedAt, 99);
  addRow({
    measurement: `${label}: webhooks: commit-to-receipt latency, ${count} one-incident CLI imports in a row, each waited for (receiver's clock)`,
    result:
      `from the event's changed_at: ${describe(fromChangedAt)}; from the CLI's exit: ${describe(fromExit)} ` +
      `(changed_at is stamped a median ${fmt(median(stampToExit))} ms before the CLI exits; each CLI run ${fmt(median(runs))} ms); ${seqs.text}`,
    target: `p99 < ${fmt(LATENCY_P99_TARGET_MS)} ms (from changed_at), every seq`,
    pass: seqs.ok && fromChangedAt.length === count && p99 < LATENCY_P99_TARGET_MS,
  });
}

/**
 * 3. Page 1 under wrk, idle and while the server delivers a backlog to the one endpoint, in
 * alternating rounds that start alike: each round imports its backlog with the endpoint disabled,
 * runs page 1 idle, enables the endpoint and runs page 1 again while the backlog flows. Both runs
 * of a round thus follow the same import (its fresh pages, row versions and autovacuum), and the
 * only difference between them is the delivery. The delivering run ends after `settings.seconds`,
 * or earlier if the backlog runs out, so that the server delivers for the whole of it; the next
 * round waits for the backlog to drain.
 */
async function pageOneWhileDelivering(ctx: Context, endpointId: string, idleRate: number): Promise<void> {
  const { label, env, api, receiver } = ctx;
  // Enough for the whole round at the idle delivery rate, with room: under wrk it delivers slower.
  const backlog = Math.min(200_000, Math.max(2000, Math.ceil(idleRate * settings.seconds * 1.5)));
  const files: string[] = [];
  for (let round = 0; round < settings.rounds; round += 1)
    files.push(await incidentsDataset(`webhooks-${api.port}-backlog-${round}.ndjson`, backlog));
  await receiver.ask({ cmd: 'reset' });
  log(
    `${label}: webhooks: page 1 idle and while delivering a backlog of ${fmt(backlog)} events, ` +
      `${settings.seconds} s each, ${settings.rounds} rounds, each after the backlog's import`,
  );
  await load(api.pid, api.port, PAGE_ONE, api.auth, { seconds: 1 });
  const idle: LoadResult[] = [];
  const busy: LoadResult[] = [];
  const deliveredPerSecond: number[] = [];
  for (const [round, file] of files.entries()) {
    await cli(['webhooks', 'disable', endpointId], env);
    await waitHeld(api, 0);
    await importFile(file, env);
    idle.push(await load(api.pid, api.port, PAGE_ONE, api.auth));
    await cli(['webhooks', 'enable', endpointId], env);
    const drained = receiver.delivered(backlog * (round + 1), `backlog ${round + 1}`);
    await receiver.delivered(backlog * round + 1, `backlog ${round + 1}'s first event`);
    const atStart = sum((await receiver.stats()).map((s) => s.distinct));
    const started = performance.now();
    busy.push(await load(api.pid, api.port, PAGE_ONE, api.auth, { until: drained }));
    const seconds = (performance.now() - started) / 1000;
    deliveredPerSecond.push((sum((await receiver.stats()).map((s) => s.distinct)) - atStart) / seconds);
    await drained;
  }
  const seqs = await checkSeqs(ctx, 1);
  const best = (runs: LoadResult[]) => Math.max(...runs.map((r) => r.rps));
  const ratio = best(busy) / best(idle);
  const pairs = busy.map((r, i) => r.rps / (idle[i] as LoadResult).rps);
  const failed = failures([...idle, ...busy]);
  const shortest = Math.min(...busy.map((r) => r.requests / r.rps));
  addRow({
    measurement: `${label}: webhooks: page 1 req/s while delivering to one endpoint vs idle, best of ${settings.rounds} alternating rounds`,
    result:
      `${fmt(best(busy))} vs ${fmt(best(idle))} = ${fmt(ratio * 100)}% (rounds: delivering ${spread(busy.map((r) => r.rps))}, ` +
      `idle ${spread(idle.map((r) => r.rps))}; round by round ${spread(pairs.map((p) => p * 100))}%); ` +
      `meanwhile ${spread(deliveredPerSecond)} events/s delivered` +
      `${shortest < settings.seconds - 0.5 ? ` (the backlog ran out: shortest round ${fmt(shortest, 1)} s)` : ''}; ` +
      `p99 ${spread(
        busy.map((r) => r.latencyMs.p99),
        1,
      )} vs ${spread(
        idle.map((r) => r.latencyMs.p99),
        1,
      )} ms; ` +
      `server at ${spread(busy.map((r) => r.cpuPercent))}% / ${spread(idle.map((r) => r.cpuPercent))}% of a core; ${seqs.text}` +
      `${failed > 0 ? `; ${failed} failed requests!` : ''}`,
    target: `>= ${fmt(WHILE_DELIVERING_TARGET * 100)}% of idle`,
    pass: failed === 0 && seqs.ok && ratio >= WHILE_DELIVERING_TARGET,
  });
}

/**
 * 4. Fan-out: `settings.webhookEndpoints` endpoints on the account, `settings.webhookFanOutEvents`
 * changes in one import, each to every endpoint; the server's RSS sampled against the events the
 * receiver has got, and its V8 heap before and after, with what is alive after a full collection.
 * A fan-out that stops short (no event for STALL_MS) is reported, not thrown: how far it got and
 * at how many endpoints is the finding.
 */
async function fanOut(ctx: Context): Promise<void> {
  const { label, env, api, receiver } = ctx;
  const endpoints = settings.webhookEndpoints;
  const events = settings.webhookFanOutEvents;
  const total = endpoints * events;
  log(`${label}: webhooks: creating ${endpoints} endpoints`);
  for (let next = 0; next < endpoints; next += CREATE_CONCURRENCY) {
    const batch = Array.from({ length: Math.min(CREATE_CONCURRENCY, endpoints - next) }, (_, i) => next + i);
    await Promise.all(batch.map((i) => createEndpoint(env, receiver.url(i))));
  }
  await waitHeld(api, endpoints);
  const file = await incidentsDataset(`webhooks-${api.port}-fan-out.ndjson`, events);
  await receiver.ask({ cmd: 'reset' });
  log(`${label}: webhooks: ${fmt(events)} incidents in one import, to each of ${endpoints} endpoints`);

  const heapBefore = await heapAfterFullGc(ctx.inspectPort);
  const before = await attempts(api);
  const peak = sampleMemory(api.pid);
  const curve: { delivered: number; rssMb: number }[] = [];
  // One more reading of the live heap when half the deliveries have arrived: beside the one at the
  // end, it says whether what stays alive grows with the events (a full GC pauses the server once).
  let heapHalfway: HeapReading | null = null;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const delivered = sum((await receiver.stats()).map((s) => s.distinct));
      curve.push({ delivered, rssMb: memoryMb(api.pid, 'VmRSS') });
      if (heapHalfway === null && delivered >= total / 2)
        heapHalfway = await heapAfterFullGc(ctx.inspectPort);
      await sleep(250);
    }
  })();
  let cost: Awaited<ReturnType<typeof deliveryCost>> | null = null;
  let stalled: string | null = null;
  let memory: { beforeMb: number; peakMb: number };
  try {
    await importFile(file, env);
    cost = await deliveryCost(ctx, total, 'fan-out');
  } catch (error) {
    if (!(error instanceof StallError)) throw error;
    stalled = error.message;
  } finally {
    sampling = false;
    await sampler;
    memory = peak.stop();
  }
  const endMb = memoryMb(api.pid, 'VmRSS');
  const heapAfter = await heapAfterFullGc(ctx.inspectPort);
  const halfway = heapHalfway as HeapReading | null;
  const afterGcMb = memoryMb(api.pid, 'VmRSS');
  const made = describeAttempts(before, await attempts(api));
  const stats = (await receiver.stats()).slice(0, endpoints);
  const arrived = sum(stats.map((s) => s.distinct));
  const reached = stats.filter((s) => s.distinct > 0);
  const ms = Math.max(...reached.map((s) => s.lastAt)) - Math.min(...reached.map((s) => s.firstAt));
  const complete = stats.filter((s) => s.distinct === events);
  const perEndpoint = complete.map((s) => (s.distinct / (s.lastAt - s.firstAt)) * 1000);
  const seqs = stalled === null ? await checkSeqs(ctx, endpoints) : null;
  const rates =
    perEndpoint.length === 0
      ? ''
      : `; per endpoint ${spread(perEndpoint)} events/s (median ${fmt(median(perEndpoint))})`;
  addRow({
    measurement: `${label}: webhooks: ${fmt(events)} incidents in one import to each of ${endpoints} endpoints (${fmt(total)} deliveries), first to last receipt`,
    result:
      stalled === null && cost !== null && seqs !== null
        ? `${fmt(ms / 1000, 1)} s = ${fmt((total / ms) * 1000)} deliveries/s in all${rates}; ` +
          `server ${fmt(cost.serverUs)} µs of CPU a delivery, at ${fmt(cost.serverPercent)}% of a core ` +
          `(receiver ${fmt(cost.receiverPercent)}%); ${seqs.text}; ${made.text}`
        : `STOPPED SHORT: ${stalled}. ${complete.length} endpoints got all ${fmt(events)} events, ` +
          `${endpoints - reached.length} got none, ${reached.length - complete.length} some; ` +
          `${fmt(arrived)} deliveries in ${fmt(ms / 1000, 1)} s = ${fmt((arrived / ms) * 1000)}/s${rates}; ${made.text}`,
    target: 'every seq once, in order, at every endpoint',
    pass: stalled === null && seqs !== null && seqs.ok && made.failed === 0,
  });
  // The RSS when a share of what arrived had arrived: the first sample at or past it.
  const at = (share: number) => curve.find((c) => c.delivered >= share * arrived)?.rssMb ?? endMb;
  const marks = [0.1, 0.25, 0.5, 0.75, 1].map((share) => `${fmt(share * 100)}% ${fmt(at(share))}`);
  const growth = endMb - at(0.5);
  const liveGrowth = halfway === null ? null : heapAfter.liveMb - halfway.liveMb;
  addRow({
    measurement: `${label}: webhooks: server memory during those deliveries (VmRSS every 10 ms for the peak; at shares of the events received; V8's heap by the inspector)`,
    result:
      `RSS start ${fmt(memory.beforeMb)} MB, peak ${fmt(memory.peakMb)} MB, end ${fmt(endMb)} MB (${fmt(afterGcMb)} MB after a full GC); ` +
      `at ${marks.join(', ')} MB: from half delivered to the end ${growth >= 0 ? '+' : ''}${fmt(growth)} MB; ` +
      `V8 heap ${fmt(heapBefore.totalMb)} → ${fmt(heapAfter.totalMb)} MB; alive after a full GC: ${fmt(heapBefore.liveMb)} MB before, ` +
      `${halfway === null ? '' : `${fmt(halfway.liveMb)} MB halfway, `}${fmt(heapAfter.liveMb)} MB at the end`,
    target: `flat: RSS and live heap < +${fmt(FLAT_SHARE * 100)}% from half delivered to the end`,
    pass:
      halfway !== null &&
      liveGrowth !== null &&
      growth < FLAT_SHARE * at(0.5) &&
      liveGrowth < FLAT_SHARE * halfway.liveMb,
  });
}

/** Runs `part` and says on stderr how long it took. */
async function timed<T>(label: string, name: string, part: () => Promise<T>): Promise<T> {
  const started = performance.now();
  const result = await part();
  log(`${label}: webhooks: ${name} took ${fmt((performance.now() - started) / 1000)} s`);
  return result;
}

/**
 * The whole scenario on one store (`storeEnv`: its DATABASE_URL, and REDIS_URL for PostgreSQL +
 * Redis, on a database of its own): the demo account without incidents, a server, one endpoint,
 * then the four measurements above.
 */
export async function webhookDeliveries(label: string, storeEnv: Record<string, string>): Promise<void> {
  // The fan-out's endpoints are one account's: more than the 20 an account may have by default. All
  // are on one receiver host, and the scenario measures the delivery path, not the rate per
  // destination host (1,000 a second by default) that bounds it.
  const env = {
    ...storeEnv,
    WEBHOOKS_ALLOW_PRIVATE: 'true',
    WEBHOOK_MAX_ENDPOINTS: String(Math.max(20, settings.webhookEndpoints)),
    WEBHOOK_HOST_RATE: '100000',
  };
  await importFile(await accountDataset(`webhooks-account-${Date.now()}.ndjson`), env);
  const receiver = await Receiver.start(settings.webhookEndpoints);
  try {
    // The inspector, idle but for two readings of the heap in the fan-out.
    const inspectPort = nextPort();
    const api = await startApi(`${label} webhooks`, env, [`--inspect=127.0.0.1:${inspectPort}`]);
    try {
      const endpoint = await createEndpoint(env, receiver.url(0));
      await waitHeld(api, 1);
      const ctx: Context = { label, env, api, inspectPort, receiver, cursor: endpoint.cursor };
      const rate = await timed(label, 'throughput', () => throughput(ctx));
      await timed(label, 'latency', () => latency(ctx));
      await timed(label, 'page 1 while delivering', () => pageOneWhileDelivering(ctx, endpoint.id, rate));
      await cli(['webhooks', 'delete', endpoint.id], env);
      await timed(label, 'fan-out', () => fanOut(ctx));
    } finally {
      await stop(api.process);
    }
  } finally {
    receiver.close();
  }
}
