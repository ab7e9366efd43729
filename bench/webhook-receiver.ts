import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The webhooks scenario's receiver (bench/scenarios/webhooks.ts): a bare node:http server in a
 * process of its own that answers every POST with 204 at once. It listens on as many ports as the
 * scenario has endpoints (argv[2]), one each, so that every endpoint is its own origin, as
 * receivers on different hosts are. For each endpoint it counts the events, checks their order by
 * `data.seq` (a first arrival below the highest seq seen is out of order; a seq seen before is a
 * repeat), and keeps each event's seq, its receipt time and the time from its `changed_at` to its
 * receipt (this process's clock, the same machine's as the server's). It does not verify the
 * signatures (the tests do): it stands for a receiver that costs next to nothing.
 *
 * The scenario talks to it over IPC: `reset`, `stats`, `check` (which of the expected seqs never
 * came, which came that were not expected), `events` (seqs and latencies of one endpoint) and
 * `waitFor` (answers once the endpoints hold that many distinct events in all, or at its timeout).
 */

interface Endpoint {
  seqs: number[];
  /** Receipt times (ms since the epoch, sub-millisecond), in arrival order. */
  times: number[];
  /** Milliseconds from `changed_at` to receipt, per event, in arrival order. */
  latencies: number[];
  seen: Set<number>;
  maxSeq: number;
  duplicates: number;
  outOfOrder: number;
  /** Receipt times (ms since the epoch, sub-millisecond) of the first and last event. */
  firstAt: number;
  lastAt: number;
}

export interface EndpointStats {
  received: number;
  distinct: number;
  duplicates: number;
  outOfOrder: number;
  maxSeq: number;
  firstAt: number;
  lastAt: number;
}

export type ReceiverRequest =
  | { id: number; cmd: 'reset' }
  | { id: number; cmd: 'stats' }
  | { id: number; cmd: 'check'; expected: number[] }
  | { id: number; cmd: 'events'; endpoint: number }
  | { id: number; cmd: 'waitFor'; distinct: number; timeoutMs: number };

const count = Number(process.argv[2] ?? '1');
const now = () => performance.timeOrigin + performance.now();
const fresh = (): Endpoint => ({
  seqs: [],
  times: [],
  latencies: [],
  seen: new Set(),
  maxSeq: 0,
  duplicates: 0,
  outOfOrder: 0,
  firstAt: 0,
  lastAt: 0,
});
let endpoints: Endpoint[] = Array.from({ length: count }, fresh);
let distinctTotal = 0;
let waiters: { distinct: number; answer: () => void }[] = [];

function stats(): EndpointStats[] {
  return endpoints.map((e) => ({
    received: e.seqs.length,
    distinct: e.seen.size,
    duplicates: e.duplicates,
    outOfOrder: e.outOfOrder,
    maxSeq: e.maxSeq,
    firstAt: e.firstAt,
    lastAt: e.lastAt,
  }));
}

function receive(index: number, body: string): void {
  const at = now();
  const event = JSON.parse(body) as { data: { seq: number | null; changed_at: string } };
  const seq = event.data.seq ?? 0;
  const e = endpoints[index] as Endpoint;
  if (e.seqs.length === 0) e.firstAt = at;
  e.lastAt = at;
  e.seqs.push(seq);
  e.times.push(at);
  e.latencies.push(at - Date.parse(event.data.changed_at));
  if (e.seen.has(seq)) e.duplicates += 1;
  else {
    if (seq < e.maxSeq) e.outOfOrder += 1;
    e.seen.add(seq);
    e.maxSeq = Math.max(e.maxSeq, seq);
    distinctTotal += 1;
    if (waiters.length > 0) {
      waiters = waiters.filter((w) => {
        if (distinctTotal < w.distinct) return true;
        w.answer();
        return false;
      });
    }
  }
}

const servers: Server[] = endpoints.map((_e, index) =>
  createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      receive(index, Buffer.concat(chunks).toString('utf8'));
      response.statusCode = 204;
      response.end();
    });
  }),
);

const reply = (message: object) => process.send?.(message);

process.on('message', (request: ReceiverRequest) => {
  switch (request.cmd) {
    case 'reset':
      endpoints = Array.from({ length: count }, fresh);
      distinctTotal = 0;
      reply({ id: request.id });
      break;
    case 'stats':
      reply({ id: request.id, stats: stats() });
      break;
    case 'check': {
      const expected = new Set(request.expected);
      reply({
        id: request.id,
        checks: endpoints.map((e) => {
          const missing = request.expected.filter((seq) => !e.seen.has(seq));
          const unexpected = [...e.seen].filter((seq) => !expected.has(seq));
          return {
            missing: missing.length,
            unexpected: unexpected.length,
            firstMissing: missing.slice(0, 5),
          };
        }),
      });
      break;
    }
    case 'events': {
      const e = endpoints[request.endpoint] as Endpoint;
      reply({ id: request.id, seqs: e.seqs, times: e.times, latencies: e.latencies });
      break;
    }
    case 'waitFor': {
      const answer = () => {
        clearTimeout(timer);
        reply({ id: request.id, stats: stats() });
      };
      const timer = setTimeout(() => {
        waiters = waiters.filter((w) => w.answer !== answer);
        reply({ id: request.id, stats: stats(), timedOut: true });
      }, request.timeoutMs);
      if (distinctTotal >= request.distinct) answer();
      else waiters.push({ distinct: request.distinct, answer });
      break;
    }
  }
});
// The scenario's end closes the IPC channel: then this process ends too.
process.on('disconnect', () => process.exit(0));

let listening = 0;
for (const server of servers) {
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => {
    listening += 1;
    if (listening === servers.length)
      reply({ ready: true, ports: servers.map((s) => (s.address() as AddressInfo).port) });
  });
}
