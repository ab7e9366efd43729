import { type LookupAddress, promises as dns } from 'node:dns';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';

/**
 * Host names of webhook receivers, looked up off libuv's thread pool and within a deadline.
 *
 * `dns.lookup` is getaddrinfo on one of libuv's 4 threads, with no deadline of ours: a few names
 * whose DNS hangs would hold every thread, and password hashing and file work would wait behind
 * them, for every tenant. Here a name is looked up:
 *
 * 1. in the hosts file (/etc/hosts, as getaddrinfo reads it first), read again at most every
 *    HOSTS_FILE_TTL_MS; then `localhost` and `*.localhost` are loopback (RFC 6761) even when the
 *    file does not list them;
 * 2. otherwise with DNS, through c-ares (`dns.Resolver`: A and AAAA queries on the event loop, no
 *    thread), as written: no search domains are appended.
 *
 * A lookup has DNS_DEADLINE_MS in all (waiting for its turn included): past it its queries are
 * cancelled and it fails with `DnsTimeoutError`, or it returns the addresses of the family that did
 * answer. At most MAX_LOOKUPS run at once; lookups of a name already being looked up share that
 * lookup. Nothing is cached beyond the hosts file: each new connection looks its name up again, and
 * the caller checks the very addresses it is given (DNS rebinding, outbound.ts).
 */

export const DNS_DEADLINE_MS = 5000;
export const MAX_LOOKUPS = 32;
const HOSTS_FILE_TTL_MS = 5000;
const SYSTEM_HOSTS_FILE = '/etc/hosts';

export interface DnsOptions {
  /** Name servers (`address` or `address:port`); the system's (/etc/resolv.conf) by default. */
  servers?: string[];
  /** The whole lookup, its wait for a turn included (DNS_DEADLINE_MS by default). */
  deadlineMs?: number;
  /** Lookups in flight at once (MAX_LOOKUPS by default); more wait for a turn within their deadline. */
  maxLookups?: number;
  /** The hosts file read first (/etc/hosts by default); null for none. */
  hostsFile?: string | null;
}

/** No answer within the deadline: the DNS servers were silent, or the lookup never had its turn. */
export class DnsTimeoutError extends Error {
  override name = 'DnsTimeoutError';
  readonly code = 'ETIMEOUT';
}

/** The name has no address (NXDOMAIN, or neither an A nor an AAAA record). */
export class HostNotFoundError extends Error {
  override name = 'HostNotFoundError';
  readonly code = 'ENOTFOUND';
}

const LOOPBACK: LookupAddress[] = [
  { address: '127.0.0.1', family: 4 },
  { address: '::1', family: 6 },
];

/** Codes c-ares gives for a name without an address of the family asked. */
const NO_ADDRESS = new Set(['ENODATA', 'ENOTFOUND', 'NOTFOUND', 'NODATA']);

/** The addresses a hosts file gives each name (lower case). */
export function parseHostsFile(text: string): Map<string, LookupAddress[]> {
  const table = new Map<string, LookupAddress[]>();
  for (const line of text.split('\n')) {
    const [address, ...names] = (line.split('#')[0] ?? '').trim().split(/\s+/);
    const family = address === undefined ? 0 : isIP(address);
    if (address === undefined || family === 0) continue;
    for (const name of names) {
      const key = name.toLowerCase();
      const known = table.get(key) ?? [];
      if (!known.some((entry) => entry.address === address)) known.push({ address, family });
      table.set(key, known);
    }
  }
  return table;
}

export class DnsResolver {
  private readonly deadlineMs: number;
  private readonly maxLookups: number;
  private running = 0;
  private readonly turns: (() => void)[] = [];
  private readonly inFlight = new Map<string, Promise<LookupAddress[]>>();
  private hosts: { readAt: number; table: Map<string, LookupAddress[]> } | null = null;
  private readonly options: DnsOptions;

  constructor(options: DnsOptions = {}) {
    this.options = options;
    this.deadlineMs = options.deadlineMs ?? DNS_DEADLINE_MS;
    this.maxLookups = options.maxLookups ?? MAX_LOOKUPS;
  }

  /** Every address of `hostname`; rejects with DnsTimeoutError, HostNotFoundError or c-ares's error. */
  readonly lookup = (hostname: string): Promise<LookupAddress[]> => {
    const name = hostname.toLowerCase().replace(/\.$/, '');
    const listed = this.hostsTable().get(name);
    if (listed !== undefined) return Promise.resolve(listed);
    if (name === 'localhost' || name.endsWith('.localhost')) return Promise.resolve(LOOPBACK);
    let lookup = this.inFlight.get(name);
    if (lookup === undefined) {
      lookup = this.resolveWithin(name).finally(() => this.inFlight.delete(name));
      this.inFlight.set(name, lookup);
    }
    return lookup;
  };

  /**
   * The hosts file's table. Read synchronously, as getaddrinfo does: a small local file, read at
   * most every HOSTS_FILE_TTL_MS, which would otherwise wait for a thread of the pool it spares.
   */
  private hostsTable(): Map<string, LookupAddress[]> {
    const file = this.options.hostsFile === undefined ? SYSTEM_HOSTS_FILE : this.options.hostsFile;
    if (file === null) return new Map();
    const now = Date.now();
    if (this.hosts === null || now - this.hosts.readAt >= HOSTS_FILE_TTL_MS || now < this.hosts.readAt) {
      let text = '';
      try {
        text = readFileSync(file, 'utf8');
      } catch {
        // No hosts file: every name goes to DNS.
      }
      this.hosts = { readAt: now, table: parseHostsFile(text) };
    }
    return this.hosts.table;
  }

  private async resolveWithin(name: string): Promise<LookupAddress[]> {
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), this.deadlineMs);
    try {
      if (!(await this.turn(deadline.signal)))
        throw new DnsTimeoutError(
          `no DNS answer for "${name}" within ${this.deadlineMs} ms (${this.maxLookups} lookups already in flight)`,
        );
      try {
        return await this.query(name, deadline.signal);
      } finally {
        this.next();
      }
    } finally {
      clearTimeout(timer);
    }
  }

  /** Waits for a turn among MAX_LOOKUPS; false if `signal` ends the wait first. */
  private turn(signal: AbortSignal): Promise<boolean> {
    if (this.running < this.maxLookups) {
      this.running += 1;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const take = () => {
        signal.removeEventListener('abort', giveUp);
        resolve(true);
      };
      const giveUp = () => {
        const index = this.turns.indexOf(take);
        if (index !== -1) this.turns.splice(index, 1);
        resolve(false);
      };
      this.turns.push(take);
      signal.addEventListener('abort', giveUp, { once: true });
    });
  }

  /** Hands the turn that ended to the next lookup waiting, if any. */
  private next(): void {
    const waiting = this.turns.shift();
    if (waiting === undefined) this.running -= 1;
    else waiting();
  }

  /** A and AAAA at once, on a resolver of this lookup's own, cancelled when `deadline` ends. */
  private async query(name: string, deadline: AbortSignal): Promise<LookupAddress[]> {
    // c-ares tries again within the deadline (a lost datagram), then the deadline cancels it all.
    const resolver = new dns.Resolver({ timeout: Math.max(1, Math.floor(this.deadlineMs / 3)), tries: 2 });
    if (this.options.servers !== undefined) resolver.setServers(this.options.servers);
    const cancel = () => resolver.cancel();
    deadline.addEventListener('abort', cancel, { once: true });
    let answers: PromiseSettledResult<string[]>[];
    try {
      answers = await Promise.allSettled([resolver.resolve4(name), resolver.resolve6(name)]);
    } finally {
      deadline.removeEventListener('abort', cancel);
    }
    const addresses = answers.flatMap((answer, i) =>
      answer.status === 'fulfilled'
        ? answer.value.map((address) => ({ address, family: i === 0 ? 4 : 6 }))
        : [],
    );
    if (addresses.length > 0) return addresses;
    const codes = answers.map((answer) =>
      answer.status === 'rejected' ? errorCode(answer.reason) : 'ENODATA',
    );
    if (codes.every((code) => NO_ADDRESS.has(code)))
      throw new HostNotFoundError(`"${name}" does not resolve (no A or AAAA record)`);
    if (deadline.aborted || codes.some((code) => code === 'ETIMEOUT' || code === 'ECANCELLED'))
      throw new DnsTimeoutError(`no DNS answer for "${name}" within ${this.deadlineMs} ms`);
    const failed = answers.find((answer) => answer.status === 'rejected');
    throw failed?.reason instanceof Error ? failed.reason : new Error(`DNS lookup of "${name}" failed`);
  }
}

function errorCode(error: unknown): string {
  return error instanceof Error && 'code' in error && typeof error.code === 'string' ? error.code : '';
}
