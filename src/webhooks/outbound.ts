import type { LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import type { buildConnector } from 'undici';
import { InputError } from '../errors.ts';
import { type Connection, ConnectionPools } from './connections.ts';
import { DnsResolver, type DnsOptions, DnsTimeoutError } from './dns.ts';

/**
 * The one way this service makes outbound HTTP requests: webhook deliveries. A receiver's URL is
 * chosen by a tenant, so every connection is checked on the address it actually dials: the
 * resolver's answers are checked before the socket connects (and every one of them, so a host that
 * answers with a public and a private address is refused), an address written in the URL is checked
 * before dialling, and the connected socket's peer is checked again before a byte is sent. A DNS
 * answer that changes after the endpoint was created (rebinding) is therefore caught at delivery.
 *
 * Only public unicast addresses pass (ipaddr.js's `unicast` range): loopback, RFC 1918, unique-local,
 * link-local (cloud metadata at 169.254.169.254), CGNAT, multicast, unspecified, broadcast, the
 * reserved ranges and the IPv6 forms that embed an IPv4 address (mapped, 6to4, Teredo, NAT64) are
 * refused, and so is every IPv6 address outside global unicast (2000::/3), such as the deprecated
 * IPv4-compatible `::127.0.0.1`. WEBHOOKS_ALLOW_PRIVATE lifts all of this, and allows http://, for tests and development.
 *
 * Names are looked up off libuv's thread pool, within a deadline (./dns.ts). Connections are pooled
 * per destination, with a cap on all of them together (./connections.ts); an attempt's timeout
 * starts when its request has its connection (`post`).
 */

/** Resolves a host name to every address it has (`DnsResolver.lookup`, by default). */
export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

/** A connection the guard refused: it was never made. */
export class RefusedDestinationError extends Error {
  override name = 'RefusedDestinationError';
}

const RANGE_NAMES: Record<string, string> = {
  loopback: 'loopback',
  private: 'RFC 1918 private',
  uniqueLocal: 'unique-local',
  linkLocal: 'link-local',
  carrierGradeNat: 'carrier-grade NAT',
  multicast: 'multicast',
  unspecified: 'unspecified',
  broadcast: 'broadcast',
  reserved: 'reserved',
  ipv4Mapped: 'IPv4-mapped',
  rfc6145: 'IPv4-translated',
  rfc6052: 'NAT64',
  '6to4': '6to4',
  teredo: 'Teredo',
  benchmarking: 'benchmarking',
  amt: 'AMT',
  as112: 'AS112',
  deprecated: 'deprecated',
  orchid2: 'ORCHIDv2',
  droneRemoteIdProtocolEntityTags: 'reserved',
};

/** IPv6's global unicast: every other IPv6 address (IPv4-compatible `::a.b.c.d` too) is refused. */
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

/** Why `address` may not be dialled (`10.0.0.1 (private (RFC 1918))`), or null for a public unicast address. */
export function addressProblem(address: string): string | null {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    // `process` turns an IPv4-mapped IPv6 address into the IPv4 address it carries.
    parsed = ipaddr.process(address);
  } catch {
    return `"${address}" (not an IP address)`;
  }
  const range = parsed.range();
  if (range !== 'unicast') return `${address} (${RANGE_NAMES[range] ?? range})`;
  if (parsed.kind() === 'ipv6' && !parsed.match(GLOBAL_UNICAST_V6)) {
    return `${address} (not global unicast (2000::/3))`;
  }
  return null;
}

const unbracketed = (host: string) => (host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host);

/** Every address of `host` (an address itself, or a name), refused as a whole if any is not public. */
async function checkedAddresses(host: string, resolve: Resolver): Promise<LookupAddress[]> {
  const literal = isIP(host);
  const addresses = literal === 0 ? await resolve(host) : [{ address: host, family: literal }];
  if (addresses.length === 0) throw new RefusedDestinationError(`"${host}" has no address`);
  for (const { address } of addresses) {
    const problem = addressProblem(address);
    if (problem !== null)
      throw new RefusedDestinationError(
        literal === 0
          ? `"${host}" resolves to ${problem}, not a public address`
          : `${problem} is not a public address`,
      );
  }
  return addresses;
}

export interface OutboundOptions {
  /** WEBHOOKS_ALLOW_PRIVATE: http:// and private addresses allowed. */
  allowPrivate: boolean;
  /**
   * WEBHOOK_TIMEOUT_MS: the receiver's time, from the moment the request has its connection to the
   * end of the answer read.
   */
  timeoutMs: number;
  /**
   * How long an attempt may take to have its connection: waiting for a free one, the DNS lookup,
   * connecting and TLS (`timeoutMs` by default).
   */
  connectWithinMs?: number;
  /** Connections open at once to all destinations (MAX_CONNECTIONS by default). */
  maxConnections?: number;
  /** Connections open at once to one destination, an origin (MAX_CONNECTIONS_PER_ORIGIN by default). */
  maxConnectionsPerOrigin?: number;
  /** The DNS resolver's settings (./dns.ts); tests point it at a server of theirs. */
  dns?: DnsOptions;
  /** Tests stand in for DNS here (instead of the resolver of `dns`). */
  resolve?: Resolver;
}

/** Connections open at once to all destinations, by default. */
export const MAX_CONNECTIONS = 256;
/** Connections open at once to one destination (scheme, host and port), by default. */
export const MAX_CONNECTIONS_PER_ORIGIN = 32;
/** How long a connection is kept open, idle, for the next request to its destination. */
const KEEP_ALIVE_MS = 4_000;

/**
 * Why an attempt brought no HTTP answer: `timeout` (no answer, or no connection made, in time),
 * `network_error`, `refused` (the address guard), or `not_sent`: the request never left, for a
 * reason that is not the receiver's (no free connection in time, or the caller said not to send
 * it when it had its connection). Null when an answer came.
 */
export type PostFailure = 'timeout' | 'network_error' | 'refused' | 'not_sent';

/**
 * An answer as the delivery log keeps it: its headers, and the first RESPONSE_BODY_KEPT bytes of its
 * body as text (invalid UTF-8 and NUL characters replaced by U+FFFD, which both stores can hold).
 */
export interface CapturedAnswer {
  headers: Record<string, string | string[]>;
  body: string;
}

/** What one POST came to. `status` null: no HTTP answer (refused, timed out, network error, not sent). */
export interface PostResult {
  status: number | null;
  error: string | null;
  /** The answer, when one came (its status is `status`); null otherwise. */
  response: CapturedAnswer | null;
  /** From the call to its end: waiting for a connection included. */
  durationMs: number;
  /** A 429's or 503's `Retry-After`, in milliseconds from the answer (0 for a date past); else null. */
  retryAfterMs: number | null;
  failure: PostFailure | null;
}

export interface PostOptions {
  /** Ends the attempt early (the server shutting down); its result is then `not_sent` or a failure. */
  signal?: AbortSignal;
  /**
   * Asked when the request has its connection, just before it is written: a reason not to send it
   * (the delivery loop's lease could not cover the receiver's time any more), or null to send it.
   */
  beforeSend?: () => string | null;
}

/**
 * `Retry-After` (RFC 9110 §10.2.3) as milliseconds from `now`: delay-seconds or an HTTP date; null
 * when absent or neither.
 */
export function retryAfterMs(value: string | string[] | undefined, now: number): number | null {
  const text = (Array.isArray(value) ? value[0] : value)?.trim() ?? '';
  if (/^\d{1,10}$/.test(text)) return Number(text) * 1000;
  const date = /[a-z]/i.test(text) ? Date.parse(text) : Number.NaN;
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}

/**
 * How much of an answer is read: receivers are not ours, and their bodies mean nothing to delivery.
 * Reading a short answer to its end lets its connection carry the next request.
 */
export const MAX_ANSWER_BYTES = 64 * 1024;
/** How much of an answer's body is kept for the delivery log; the rest is dropped as it arrives. */
export const RESPONSE_BODY_KEPT = 4 * 1024;
/** How much of a failed answer the attempt's one-line error quotes. */
const ANSWER_EXCERPT_CHARS = 200;
const USER_AGENT = 'SafetyIncidentAPI-Webhooks/1.0';
const MAX_URL_LENGTH = 2048;

/** The headers a POST of `post` carries: the caller's (the signature's three), then the content type and ours. */
export function outboundHeaders(headers: Record<string, string>): Record<string, string> {
  return { ...headers, 'content-type': 'application/json', 'user-agent': USER_AGENT };
}

/** How an attempt was ended by this client (its reason is the delivery log's text). */
class AttemptEnded extends Error {
  override name = 'AttemptEnded';
  readonly failure: PostFailure;

  constructor(message: string, failure: PostFailure) {
    super(message);
    this.failure = failure;
  }
}

type Undici = typeof import('undici');

/**
 * undici, loaded by the first POST of the process: the commands that only check or list endpoints
 * (most `webhooks` commands) never load its 110 modules.
 */
let undici: Promise<Undici> | undefined;

export class OutboundClient {
  /** Made at the first POST, with undici. */
  private pools: ConnectionPools | null = null;
  private readonly resolve: Resolver;
  private readonly connectWithinMs: number;

  private readonly options: OutboundOptions;

  constructor(options: OutboundOptions) {
    this.options = options;
    this.resolve = options.resolve ?? new DnsResolver(options.dns).lookup;
    this.connectWithinMs = options.connectWithinMs ?? options.timeoutMs;
  }

  /** undici and the pools, loaded and made at the first call. */
  private async http(): Promise<{ request: Undici['request']; pools: ConnectionPools }> {
    const { Client, buildConnector, request } = await (undici ??= import('undici'));
    const { options } = this;
    this.pools ??= new ConnectionPools(
      {
        max: options.maxConnections ?? MAX_CONNECTIONS,
        perOrigin: options.maxConnectionsPerOrigin ?? MAX_CONNECTIONS_PER_ORIGIN,
      },
      (origin, stage) =>
        new Client(origin, {
          connect: this.connector(buildConnector, stage),
          keepAliveTimeout: KEEP_ALIVE_MS,
          pipelining: 1,
          headersTimeout: 0,
          bodyTimeout: 0,
        }),
    );
    return { request, pools: this.pools };
  }

  /** Connections open now, to all destinations. */
  get openConnections(): number {
    return this.pools?.size ?? 0;
  }

  /**
   * The URL as it will be stored, or an InputError saying in one line why it cannot receive
   * webhooks: not an absolute http(s) URL, plain http, port 0, credentials in it, or a host that
   * does not resolve to public addresses only.
   */
  async checkUrl(raw: string): Promise<string> {
    let url: URL;
    try {
      url = new URL(raw.trim());
    } catch {
      throw new InputError(`url must be an absolute https:// URL (got "${raw}")`);
    }
    if (raw.length > MAX_URL_LENGTH) throw new InputError(`url must be at most ${MAX_URL_LENGTH} characters`);
    const schemes = this.options.allowPrivate ? ['https:', 'http:'] : ['https:'];
    if (!schemes.includes(url.protocol)) {
      throw new InputError(
        this.options.allowPrivate
          ? `url must start with https:// or http:// (got "${raw}")`
          : `url must start with https:// (got "${raw}"); http:// is allowed only with WEBHOOKS_ALLOW_PRIVATE=true`,
      );
    }
    // The URL parser keeps port 0, which no connection can reach.
    if (url.port === '0') throw new InputError(`url must not name port 0 (got "${raw}")`);
    if (url.username !== '' || url.password !== '')
      throw new InputError(
        'url must not carry credentials (user:password@): sign requests with the secret instead',
      );
    if (!this.options.allowPrivate) {
      try {
        await checkedAddresses(unbracketed(url.hostname), this.resolve);
      } catch (error) {
        if (error instanceof RefusedDestinationError)
          throw new InputError(`url refused: ${error.message}; webhooks go to public addresses only`);
        if (error instanceof DnsTimeoutError)
          throw new InputError(`url refused: its host "${url.hostname}" does not resolve (${error.message})`);
        throw new InputError(`url refused: its host "${url.hostname}" does not resolve`);
      }
    }
    return url.toString();
  }

  /**
   * POSTs `body` with `headers`; never throws. Redirects are not followed: a 3xx is a failure.
   *
   * Two deadlines, one after the other. First the request must have its connection within
   * `connectWithinMs`: a free connection (./connections.ts), the DNS lookup, connecting, TLS. Past
   * it, a request still waiting for a free connection is `not_sent` (the receiver is not at fault:
   * this instance has too many requests in flight), one still connecting a `timeout` ("could not
   * connect"). Then the receiver has `timeoutMs` from the moment the request has its connection to
   * the end of its answer.
   */
  async post(
    url: string,
    headers: Record<string, string>,
    body: string,
    { signal, beforeSend }: PostOptions = {},
  ): Promise<PostResult> {
    // Before the clock starts: loading undici is this process's time, not the receiver's.
    const { request, pools } = await this.http();
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const { timeoutMs } = this.options;
    const connectWithinMs = this.connectWithinMs;
    // One controller and one timer at a time per attempt, all let go at its end (AbortSignal.timeout
    // and AbortSignal.any would leave a timer and a signal behind for each of thousands a second).
    // The timers are the attempt's deadlines (undici's own header and body timers are off), judged
    // after a turn of the event loop: a loop kept busy past one (a starved process, a long piece of
    // synchronous work) runs its timers before it reads the answer that arrived meanwhile, and that
    // answer came in time. Taken for a timeout, a 2xx would be sent again, as a later event.
    const attempt = new AbortController();
    let connection: Connection | null = null;
    let sent = false;
    const expire = (phase: 'connection' | 'answer') => () =>
      setImmediate(() => {
        if (phase === 'connection' && sent) return;
        attempt.abort(
          phase === 'answer'
            ? new AttemptEnded(`no answer within ${timeoutMs} ms`, 'timeout')
            : connection === null
              ? new AttemptEnded(`not sent: no free connection within ${connectWithinMs} ms`, 'not_sent')
              : new AttemptEnded(
                  `could not connect within ${connectWithinMs} ms (${connection.stage === 'lookup' ? 'no DNS answer yet' : 'connecting'})`,
                  'timeout',
                ),
        );
      });
    let timer = setTimeout(expire('connection'), connectWithinMs);
    const stop = () =>
      attempt.abort(new AttemptEnded('not sent: the attempt was abandoned (stopping)', 'not_sent'));
    signal?.addEventListener('abort', stop, { once: true });
    if (signal?.aborted === true) stop();
    let reusable = false;
    try {
      connection = await pools.acquire(new URL(url).origin, attempt.signal);
      connection.onStart = (controller) => {
        const refusal = beforeSend?.() ?? null;
        if (refusal !== null) {
          controller.abort(new AttemptEnded(`not sent: ${refusal}`, 'not_sent'));
          return false;
        }
        sent = true;
        clearTimeout(timer);
        timer = setTimeout(expire('answer'), timeoutMs);
        return true;
      };
      const answer = await request(url, {
        method: 'POST',
        dispatcher: connection.dispatcher,
        headers: outboundHeaders(headers),
        body,
        signal: attempt.signal,
        headersTimeout: 0,
        bodyTimeout: 0,
      });
      const { kept, whole } = await readAnswer(answer.body);
      reusable = whole;
      const answerBody = answerText(kept);
      const ok = answer.statusCode >= 200 && answer.statusCode < 300;
      // Only an answer that asks to come back later is heeded (RFC 9110: 503, and 429 by RFC 6585).
      const wait =
        answer.statusCode === 429 || answer.statusCode === 503
          ? retryAfterMs(answer.headers['retry-after'], Date.now())
          : null;
      const asked = wait === null ? '' : ` (Retry-After: ${Math.ceil(wait / 1000)} s)`;
      const excerpt = ok ? '' : oneLine(answerBody);
      return {
        status: answer.statusCode,
        error: ok ? null : `HTTP ${answer.statusCode}${asked}${excerpt === '' ? '' : `: ${excerpt}`}`,
        response: { headers: answerHeaders(answer.headers), body: answerBody },
        durationMs: elapsed(),
        retryAfterMs: wait,
        failure: null,
      };
    } catch (error) {
      // This client's own ends (deadlines, a stop, `beforeSend`) say why; undici may report them
      // as an abort of its own.
      const reason: unknown = attempt.signal.reason;
      const ended = attempt.signal.aborted ? reason : error;
      const { failure, message } = describeFailure(ended instanceof AttemptEnded ? ended : error);
      return {
        status: null,
        error: message,
        response: null,
        durationMs: elapsed(),
        retryAfterMs: null,
        failure,
      };
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', stop);
      if (connection !== null) {
        connection.onStart = null;
        pools.release(connection, reusable);
      }
    }
  }

  async close(): Promise<void> {
    await this.pools?.close();
  }

  /**
   * How a connection is made: through the resolver (./dns.ts) and, unless private addresses are
   * allowed, through the address guard: the resolver's answers are checked before the socket
   * connects, an address written in the URL before dialling, and the peer once connected.
   * `stage` is told where connecting stands.
   */
  private connector(
    build: typeof buildConnector,
    stage: (stage: Connection['stage']) => void,
  ): buildConnector.connector {
    const { allowPrivate } = this.options;
    const lookup: LookupFunction = (hostname, options, callback) => {
      const addresses = allowPrivate ? this.resolve(hostname) : checkedAddresses(hostname, this.resolve);
      addresses.then(
        (found) => {
          stage('connect');
          if (options.all === true) callback(null, found);
          else callback(null, found[0]?.address ?? '', found[0]?.family ?? 4);
        },
        (error: Error) => callback(error, ''),
      );
    };
    const connect = build({ timeout: this.connectWithinMs, lookup });
    return (options, callback) => {
      const host = unbracketed(options.hostname);
      stage(isIP(host) === 0 ? 'lookup' : 'connect');
      // An address in the URL is dialled without a lookup: check it before.
      const literalProblem = allowPrivate || isIP(host) === 0 ? null : addressProblem(host);
      if (literalProblem !== null) {
        callback(new RefusedDestinationError(`${literalProblem} is not a public address`), null);
        return;
      }
      connect(options, (error, socket) => {
        if (error !== null) {
          callback(error, null);
          return;
        }
        // The peer the socket really reached, whatever resolved it.
        const peer = socket.remoteAddress;
        const problem = allowPrivate ? null : peer === undefined ? 'an unknown peer' : addressProblem(peer);
        if (problem !== null) {
          socket.destroy();
          callback(new RefusedDestinationError(`connected to ${problem}, not a public address`), null);
          return;
        }
        callback(null, socket);
      });
    };
  }
}

/**
 * Reads at most MAX_ANSWER_BYTES of an answer, keeping its first RESPONSE_BODY_KEPT bytes (copied:
 * a slice would hold on to the whole chunk it came in); says whether it was read whole (else its
 * connection is not used again).
 */
async function readAnswer(
  body: AsyncIterable<Buffer> & { destroy(): void },
): Promise<{ kept: Buffer; whole: boolean }> {
  let read = 0;
  const parts: Buffer[] = [];
  let keptBytes = 0;
  for await (const chunk of body) {
    read += chunk.length;
    if (keptBytes < RESPONSE_BODY_KEPT) {
      const part = Buffer.from(chunk.subarray(0, RESPONSE_BODY_KEPT - keptBytes));
      parts.push(part);
      keptBytes += part.length;
    }
    if (read >= MAX_ANSWER_BYTES) {
      body.destroy();
      return { kept: Buffer.concat(parts, keptBytes), whole: false };
    }
  }
  return { kept: Buffer.concat(parts, keptBytes), whole: true };
}

/**
 * The kept bytes of a body as text: UTF-8, a character cut at the end left out, anything invalid
 * (and NUL, which PostgreSQL's text cannot hold) as U+FFFD.
 */
function answerText(kept: Buffer): string {
  if (kept.length === 0) return '';
  return new TextDecoder('utf-8').decode(kept, { stream: true }).replaceAll('\0', '\ufffd');
}

/** An answer's headers as the log keeps them (undici gives every name in lower case). */
function answerHeaders(
  headers: Record<string, string | string[] | undefined>,
): Record<string, string | string[]> {
  const kept: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    kept[name] = Array.isArray(value)
      ? value.map((item) => item.replaceAll('\0', '\ufffd'))
      : value.replaceAll('\0', '\ufffd');
  }
  return kept;
}

/** One line, printable, short: it is shown in the panel and the CLI. */
const oneLine = (excerpt: string) =>
  excerpt
    .replace(/[^\x20-\x7e]+/g, ' ')
    .trim()
    .slice(0, ANSWER_EXCERPT_CHARS);

function describeFailure(error: unknown): { failure: PostFailure; message: string } {
  if (error instanceof AttemptEnded) return { failure: error.failure, message: error.message };
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
  for (const candidate of [cause, error]) {
    if (candidate instanceof RefusedDestinationError)
      return { failure: 'refused', message: `refused, not connected: ${candidate.message}` };
    if (candidate instanceof DnsTimeoutError)
      return { failure: 'network_error', message: `DNS: ${candidate.message}` };
  }
  if (!(error instanceof Error)) return { failure: 'network_error', message: String(error) };
  // undici's own connect timeout, a backstop behind this client's deadline.
  if (error.name === 'ConnectTimeoutError' || errorCode(error) === 'UND_ERR_CONNECT_TIMEOUT')
    return { failure: 'timeout', message: `could not connect: ${error.message}` };
  const code = errorCode(cause) ?? errorCode(error);
  const message = cause instanceof Error ? cause.message : error.message;
  return { failure: 'network_error', message: code === undefined ? message : `${code}: ${message}` };
}

function errorCode(error: unknown): string | undefined {
  return error instanceof Error && 'code' in error && typeof error.code === 'string' ? error.code : undefined;
}
