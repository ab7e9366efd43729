import { isIP } from 'node:net';

/**
 * The one configuration loader. Every process (server, CLI, tests) reads its settings through
 * `loadConfig`, so a bad value is reported the same way everywhere: one readable message.
 */

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

export interface Config {
  port: number;
  host: string;
  /** Public origin of the service, without a trailing slash, e.g. `https://api.example.com`. */
  baseUrl: string;
  databaseUrl: string;
  /**
   * Where migrations run (MIGRATION_DATABASE_URL): the same PostgreSQL database reached another
   * way, for a `DATABASE_URL` through a transaction-mode pooler; otherwise `databaseUrl` itself.
   */
  migrationDatabaseUrl: string;
  /**
   * MIGRATE_ON_START (default true): `serve` applies pending migrations before it listens. False:
   * it applies none, and a pending migration stops it with a line naming `safety-api migrate`.
   */
  migrateOnStart: boolean;
  /**
   * `redis://` or `rediss://` (one server), or `redis+sentinel://` (a primary found through
   * Sentinels; `parseRedisUrl`). `null` keeps rate-limit counters in process memory.
   */
  redisUrl: string | null;
  logLevel: LogLevel;
  /** Private JWK set signing OAuth tokens (OAUTH_JWKS); `null`: generated once and kept in the database. */
  oauthJwks: { keys: Record<string, unknown>[] } | null;
  /** Secrets signing OAuth cookies, newest first (OAUTH_COOKIE_KEYS); `null`: generated once and kept. */
  oauthCookieKeys: string[] | null;
  /**
   * Addresses and CIDRs of the proxies whose `X-Forwarded-For` is believed (TRUST_PROXY); empty:
   * none, the client address is the peer's.
   */
  trustProxy: string[];
  /** Port of a separate listener for `/metrics` (METRICS_PORT); `null`: served on the main port. */
  metricsPort: number | null;
  /** Address that listener binds (METRICS_HOST): loopback unless the operator says otherwise. */
  metricsHost: string;
  /**
   * Days a deletion stays in the changes feed, and a feed cursor stays valid
   * (CHANGES_RETENTION_DAYS, default 400; fractions allowed, so tests can use seconds).
   */
  changesRetentionDays: number;
  /** WEBHOOKS_ALLOW_PRIVATE: webhook endpoints may be http:// and on private addresses (tests, development). */
  webhooksAllowPrivate: boolean;
  /** WEBHOOK_TIMEOUT_MS: how long one delivery attempt may take (default 10000). */
  webhookTimeoutMs: number;
  /** WEBHOOK_DISABLE_AFTER_HOURS: an endpoint failing this long is disabled (default 72; fractions allowed). */
  webhookDisableAfterHours: number;
  /**
   * WEBHOOK_LEASE_SECONDS: how long an instance's claim on an endpoint lasts unless renewed, and so
   * how soon another instance takes over when the holder dies (default 30).
   */
  webhookLeaseSeconds: number;
  /**
   * WEBHOOK_SECRETS_KEY: 32 bytes (base64) encrypting webhook signing secrets at rest; `null`: a
   * key generated once and kept in the database.
   */
  webhookSecretsKey: Buffer | null;
  /**
   * CACHE_MAX_MB: what the server's in-process caches may hold together, in MiB (default 64),
   * each cache its share in bytes (`cacheBudgets`).
   */
  cacheMaxMb: number;
  /**
   * OpenTelemetry traces, from OpenTelemetry's own `OTEL_*` variables (`parseTracing`); `null`:
   * off, and nothing of the tracing code is loaded.
   */
  tracing: TracingSettings | null;
}

/** The samplers of OTEL_TRACES_SAMPLER this server offers (the specification's, but remote ones). */
export const TRACE_SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
export type TraceSampler = (typeof TRACE_SAMPLERS)[number];

/** Where and how spans are exported, and which are kept (src/telemetry/). */
export interface TracingSettings {
  /** The OTLP/HTTP URL spans are POSTed to, `/v1/traces` included. */
  endpoint: string;
  protocol: 'http/protobuf' | 'http/json';
  /** Sent with every export (credentials of the collector, perhaps): never logged. */
  headers: Record<string, string>;
  /** How long one export may take before its spans are dropped. */
  timeoutMs: number;
  /** `service.name` and the other resource attributes (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES). */
  resource: Record<string, string>;
  sampler: TraceSampler;
  /** The ratio of the `…traceidratio` samplers (OTEL_TRACES_SAMPLER_ARG, default 1). */
  ratio: number;
  /** How long a finished span may wait before it is sent (OTEL_BSP_SCHEDULE_DELAY, default 5000 ms). */
  scheduleDelayMs: number;
  /** Finished spans held for export at most; past it new spans are dropped (OTEL_BSP_MAX_QUEUE_SIZE, 2048). */
  maxQueueSize: number;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export const DEFAULT_DATABASE_URL = 'sqlite:./data/safety-api.db';

function parsePort(name: string, raw: string, lowest: number, problems: string[]): number | null {
  if (!/^\d+$/.test(raw) || Number(raw) < lowest || Number(raw) > 65535) {
    problems.push(`${name} must be an integer from ${lowest} to 65535 (got "${raw}")`);
    return null;
  }
  return Number(raw);
}

/** One TRUST_PROXY entry: an IPv4 or IPv6 address, optionally with a /prefix length. */
function isAddressOrCidr(entry: string): boolean {
  const [address = '', prefix, ...rest] = entry.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}

function parseTrustProxy(raw: string | undefined, problems: string[]): string[] {
  if (raw === undefined || raw.trim() === '') return [];
  const entries = raw.split(',').map((entry) => entry.trim());
  const bad = entries.filter((entry) => !isAddressOrCidr(entry));
  if (bad.length > 0) {
    problems.push(
      `TRUST_PROXY must be comma-separated IP addresses or CIDRs, e.g. 10.0.0.0/8,::1 (not ${bad
        .map((entry) => `"${entry}"`)
        .join(', ')})`,
    );
    return [];
  }
  return entries;
}

function parseUrl(name: string, raw: string, protocols: string[], problems: string[]): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    problems.push(`${name} must be a URL (got "${raw}")`);
    return raw;
  }
  if (!protocols.includes(url.protocol)) {
    problems.push(`${name} must start with ${protocols.map((p) => `${p}//`).join(' or ')} (got "${raw}")`);
  }
  return raw;
}

/** A Redis primary watched by Sentinels, with its replicas: what ioredis' Sentinel client is given. */
export interface RedisSentinels {
  sentinels: { host: string; port: number }[];
  /** The name the Sentinels monitor the primary under (`sentinel monitor <name> …`). */
  name: string;
  /** Credentials of the primary and the replicas; the Sentinels are asked without any. */
  username: string | undefined;
  password: string | undefined;
  db: number;
}

/** Where REDIS_URL points: one Redis server (a URL ioredis reads itself), or a Sentinel deployment. */
export type RedisTarget = { kind: 'server'; url: string } | ({ kind: 'sentinel' } & RedisSentinels);

const SENTINEL_SCHEME = /^redis\+sentinel:\/\//i;
const SENTINEL_URL_FORM =
  'redis+sentinel://[[username]:password@]host[:port][,host[:port]…]/master-name[?db=N]';
const DEFAULT_SENTINEL_PORT = 26379;

/** One Sentinel address of a `redis+sentinel://` URL: `host`, `host:port`, `[ipv6]:port`. */
function parseSentinelAddress(entry: string): RedisSentinels['sentinels'][number] | null {
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]]+))(?::(\d{1,5}))?$/.exec(entry);
  const port = match?.[3] === undefined ? DEFAULT_SENTINEL_PORT : Number(match[3]);
  const host = match?.[1] ?? match?.[2];
  if (host === undefined || port < 1 || port > 65535) return null;
  return { host, port };
}

/** Reads a `redis+sentinel://` URL; `null` once what is wrong is in `problems` (never the password). */
function parseSentinelUrl(raw: string, problems: string[]): RedisTarget | null {
  const wrong = (what: string) => {
    problems.push(`REDIS_URL must be ${SENTINEL_URL_FORM}: ${what}`);
    return null;
  };
  const parts = /^[^:]+:\/\/(?:([^@/?#]*)@)?([^/?#]*)(?:\/([^/?#]*))?(?:\?([^#]*))?$/.exec(raw);
  if (parts === null) return wrong('it is not a URL of that form');
  const [, userinfo, hosts = '', path = '', query = ''] = parts;
  if (hosts === '') return wrong('no Sentinel address');
  const sentinels: RedisSentinels['sentinels'] = [];
  for (const entry of hosts.split(',')) {
    const address = parseSentinelAddress(entry);
    if (address === null) return wrong(`"${entry}" is not a Sentinel's host[:port]`);
    sentinels.push(address);
  }
  let name: string;
  let username: string | undefined;
  let password: string | undefined;
  try {
    name = decodeURIComponent(path);
    if (userinfo !== undefined) {
      const colon = userinfo.indexOf(':');
      if (colon < 0) return wrong('credentials are written [username]:password@');
      username = decodeURIComponent(userinfo.slice(0, colon)) || undefined;
      password = decodeURIComponent(userinfo.slice(colon + 1)) || undefined;
    }
  } catch {
    return wrong('a percent-escape in the credentials or the master name is broken');
  }
  if (name === '') return wrong('the master name is missing');
  let db = 0;
  for (const [key, value] of new URLSearchParams(query)) {
    if (key !== 'db') return wrong(`unknown parameter "${key}"`);
    if (!/^\d{1,5}$/.test(value)) return wrong(`db must be a database number (got "${value}")`);
    db = Number(value);
  }
  return { kind: 'sentinel', sentinels, name, username, password, db };
}

/**
 * Reads a REDIS_URL: `redis://` or `rediss://` for one server, `redis+sentinel://` for a primary
 * found through Sentinels. `null` once what is wrong is in `problems`.
 */
export function parseRedisUrl(raw: string, problems: string[]): RedisTarget | null {
  if (SENTINEL_SCHEME.test(raw)) return parseSentinelUrl(raw, problems);
  const before = problems.length;
  parseUrl('REDIS_URL', raw, ['redis:', 'rediss:', 'redis+sentinel:'], problems);
  return problems.length === before ? { kind: 'server', url: raw } : null;
}

export const DEFAULT_CHANGES_RETENTION_DAYS = 400;

/**
 * CACHE_MAX_MB's default: the 32 MiB of response bodies and 8 MiB of rank maps the caches held
 * before there was a setting, with SQLite's page cache cut from 64 to 16 MiB (the operating
 * system's file cache holds the rest of the file; docs/performance.md, "Server memory").
 */
export const DEFAULT_CACHE_MAX_MB = 64;
/** Below this, the response cache would hold too few page bodies to spare any query. */
const MIN_CACHE_MAX_MB = 8;

/** Every in-process cache that can grow with the data or the traffic, with its bound in bytes. */
export interface CacheBudgets {
  /** Serialized 200 bodies of the public API (src/routes/public/response-cache.ts). */
  responseBodies: number;
  /** SQLite's page cache of the server's connection (`cache_size`). */
  sqlitePages: number;
  /** Where ranks fall among positions, per account and data version (src/services/incident-service.ts). */
  rankMaps: number;
  /** Key and account rows read for authentication (src/auth/key-lookup.ts). */
  keyRows: number;
  /** Rate-limit window ends per key (src/auth/rate-limit.ts). */
  rateLimitWindows: number;
  /** Prepared SQLite statements per connection (src/db/statement-cache.ts). */
  sqliteStatements: number;
}

/**
 * CACHE_MAX_MB split among the caches: the response bodies, which spare the most work per byte,
 * take half, SQLite's pages a quarter, the rest an eighth and less; the shares add up to 31/32.
 */
export function cacheBudgets(cacheMaxMb: number): CacheBudgets {
  const total = cacheMaxMb * 1024 * 1024;
  const share = (fraction: number) => Math.floor(total * fraction);
  return {
    responseBodies: share(1 / 2),
    sqlitePages: share(1 / 4),
    rankMaps: share(1 / 8),
    keyRows: share(1 / 16),
    rateLimitWindows: share(1 / 64),
    sqliteStatements: share(1 / 64),
  };
}

function parseRetentionDays(raw: string | undefined, problems: string[]): number {
  if (raw === undefined || raw === '') return DEFAULT_CHANGES_RETENTION_DAYS;
  const days = /^\d{1,6}(\.\d{1,9})?$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(days > 0)) {
    problems.push(`CHANGES_RETENTION_DAYS must be a number of days above 0, e.g. 400 (got "${raw}")`);
    return DEFAULT_CHANGES_RETENTION_DAYS;
  }
  return days;
}

/** A positive number (fractions allowed) within `[min, max]`, or the default when unset. */
function parseNumber(
  name: string,
  raw: string | undefined,
  { fallback, min, max, unit }: { fallback: number; min: number; max: number; unit: string },
  problems: string[],
): number {
  if (raw === undefined || raw === '') return fallback;
  const value = /^\d{1,9}(\.\d{1,9})?$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(value >= min && value <= max)) {
    problems.push(
      `${name} must be a number of ${unit} from ${min} to ${max}, e.g. ${fallback} (got "${raw}")`,
    );
    return fallback;
  }
  return value;
}

function parseBoolean(name: string, raw: string | undefined, problems: string[], fallback = false): boolean {
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'false' || raw === '0') return false;
  if (raw === 'true' || raw === '1') return true;
  problems.push(`${name} must be true or false (got "${raw}")`);
  return fallback;
}

function parseSecretsKey(raw: string | undefined, problems: string[]): Buffer | null {
  if (raw === undefined || raw === '') return null;
  const key = /^[A-Za-z0-9+/_-]{43}=?$/.test(raw) ? Buffer.from(raw, 'base64') : Buffer.alloc(0);
  if (key.length !== 32) {
    problems.push(
      'WEBHOOK_SECRETS_KEY must be 32 bytes in base64, e.g. the output of "openssl rand -base64 32"',
    );
    return null;
  }
  return key;
}

function parseDatabaseUrl(raw: string | undefined, problems: string[]): string {
  if (raw === undefined || raw === '') return DEFAULT_DATABASE_URL;
  if (raw.startsWith('sqlite:')) {
    if (raw.length === 'sqlite:'.length)
      problems.push('DATABASE_URL "sqlite:" needs a file path, e.g. sqlite:./data/safety-api.db');
    return raw;
  }
  if (raw.startsWith('postgres://') || raw.startsWith('postgresql://')) {
    return parseUrl('DATABASE_URL', raw, ['postgres:', 'postgresql:'], problems);
  }
  problems.push(`DATABASE_URL must be sqlite:PATH or postgres://… (got "${raw}")`);
  return raw;
}

const MIN_COOKIE_KEY_LENGTH = 32;

function parseOauthJwks(raw: string | undefined, problems: string[]): Config['oauthJwks'] {
  if (raw === undefined || raw === '') return null;
  let jwks: unknown;
  try {
    jwks = JSON.parse(raw);
  } catch {
    problems.push('OAUTH_JWKS must be a JSON Web Key Set (JSON)');
    return null;
  }
  const keys = (jwks as { keys?: unknown })?.keys;
  const isPrivateKey = (k: unknown) =>
    typeof k === 'object' && k !== null && typeof (k as Record<string, unknown>).kty === 'string' && 'd' in k;
  if (!Array.isArray(keys) || keys.length === 0 || !keys.every(isPrivateKey)) {
    problems.push('OAUTH_JWKS must be {"keys":[…]} with at least one private key (kty and d)');
    return null;
  }
  return { keys };
}

function parseOauthCookieKeys(raw: string | undefined, problems: string[]): string[] | null {
  if (raw === undefined || raw === '') return null;
  const keys = raw.split(',').map((k) => k.trim());
  if (keys.some((k) => k.length < MIN_COOKIE_KEY_LENGTH)) {
    problems.push(
      `OAUTH_COOKIE_KEYS must be comma-separated secrets of at least ${MIN_COOKIE_KEY_LENGTH} characters`,
    );
    return null;
  }
  return keys;
}

export const DEFAULT_SERVICE_NAME = 'safety-incident-api';
const OTLP_PROTOCOLS = ['http/protobuf', 'http/json'] as const;

/** The first of `names` that is set (not empty), with its name. */
function firstSet(env: Record<string, string | undefined>, names: string[]) {
  for (const name of names) {
    const value = env[name];
    if (value !== undefined && value !== '') return { name, value };
  }
  return undefined;
}

/**
 * `name=value` pairs separated by commas, values percent-encoded (OTEL_EXPORTER_OTLP_HEADERS,
 * OTEL_RESOURCE_ATTRIBUTES). A problem names the variable and the entry's place, never its value:
 * headers carry the collector's credentials.
 */
function parsePairs(name: string, raw: string | undefined, problems: string[]): Record<string, string> {
  const pairs: Record<string, string> = {};
  if (raw === undefined || raw.trim() === '') return pairs;
  const entries = raw.split(',');
  for (const [index, entry] of entries.entries()) {
    const equals = entry.indexOf('=');
    const key = equals <= 0 ? '' : entry.slice(0, equals).trim();
    let value: string | null = null;
    try {
      value = equals <= 0 ? null : decodeURIComponent(entry.slice(equals + 1).trim());
    } catch {
      value = null;
    }
    if (key === '' || value === null) {
      problems.push(
        `${name} must be comma-separated name=value pairs, values percent-encoded (entry ${index + 1} of ${entries.length} is not)`,
      );
      return {};
    }
    pairs[key] = value;
  }
  return pairs;
}

/** A whole number of milliseconds or items from `min` to `max`, or the default when unset. */
function parseWholeNumber(
  name: string,
  raw: string | undefined,
  { fallback, min, max }: { fallback: number; min: number; max: number },
  problems: string[],
): number {
  if (raw === undefined || raw === '') return fallback;
  const value = /^\d{1,9}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(value >= min && value <= max)) {
    problems.push(`${name} must be a whole number from ${min} to ${max}, e.g. ${fallback} (got "${raw}")`);
    return fallback;
  }
  return value;
}

/** OpenTelemetry's own variables that the server reads (tracing is configured by them alone). */
const OTEL_VARIABLES = [
  'OTEL_SDK_DISABLED',
  'OTEL_TRACES_EXPORTER',
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  'OTEL_EXPORTER_OTLP_PROTOCOL',
  'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL',
  'OTEL_EXPORTER_OTLP_HEADERS',
  'OTEL_EXPORTER_OTLP_TRACES_HEADERS',
  'OTEL_EXPORTER_OTLP_TIMEOUT',
  'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT',
  'OTEL_SERVICE_NAME',
  'OTEL_RESOURCE_ATTRIBUTES',
  'OTEL_TRACES_SAMPLER',
  'OTEL_TRACES_SAMPLER_ARG',
  'OTEL_BSP_SCHEDULE_DELAY',
  'OTEL_BSP_MAX_QUEUE_SIZE',
] as const;

/**
 * OpenTelemetry's standard variables, as far as this server uses them. Tracing is on when an
 * exporter is configured: OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint; OTEL_TRACES_EXPORTER=none
 * and OTEL_SDK_DISABLED=true turn it off. The rest is checked only when tracing is on: a value the
 * server does not use stops nothing. Every variable is read in any case (`CONFIG_VARIABLES`).
 */
function parseTracing(env: NodeJS.ProcessEnv, problems: string[]): TracingSettings | null {
  const vars: Record<string, string | undefined> = Object.fromEntries(
    OTEL_VARIABLES.map((name) => [name, env[name]]),
  );

  const disabled = (vars.OTEL_SDK_DISABLED ?? '').trim().toLowerCase();
  if (disabled !== '' && disabled !== 'true' && disabled !== 'false') {
    problems.push(`OTEL_SDK_DISABLED must be true or false (got "${vars.OTEL_SDK_DISABLED}")`);
    return null;
  }
  const exporter = (vars.OTEL_TRACES_EXPORTER ?? '').trim().toLowerCase();
  if (exporter !== '' && exporter !== 'otlp' && exporter !== 'none') {
    problems.push(
      `OTEL_TRACES_EXPORTER must be otlp or none (got "${vars.OTEL_TRACES_EXPORTER}"): this server exports traces by OTLP/HTTP only`,
    );
    return null;
  }
  const specific = firstSet(vars, ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT']);
  const base = firstSet(vars, ['OTEL_EXPORTER_OTLP_ENDPOINT']);
  if (disabled === 'true' || exporter === 'none') return null;
  if (exporter !== 'otlp' && specific === undefined && base === undefined) return null;

  const before = problems.length;
  // The traces endpoint is used as given; the general one is a base that `/v1/traces` is added to.
  let endpoint = 'http://localhost:4318/v1/traces';
  if (specific !== undefined) {
    endpoint = parseUrl(specific.name, specific.value, ['http:', 'https:'], problems);
  } else if (base !== undefined) {
    endpoint = `${parseUrl(base.name, base.value, ['http:', 'https:'], problems).replace(/\/+$/, '')}/v1/traces`;
  }

  const protocolSetting = firstSet(vars, [
    'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL',
    'OTEL_EXPORTER_OTLP_PROTOCOL',
  ]);
  const protocol = (protocolSetting?.value.trim() ?? 'http/protobuf') as TracingSettings['protocol'];
  if (protocolSetting !== undefined && !OTLP_PROTOCOLS.includes(protocol)) {
    problems.push(
      `${protocolSetting.name} must be http/protobuf or http/json (got "${protocolSetting.value}")` +
        (protocolSetting.value.trim() === 'grpc' ? ': this server exports by OTLP/HTTP only' : ''),
    );
  }

  const headers = {
    ...parsePairs('OTEL_EXPORTER_OTLP_HEADERS', vars.OTEL_EXPORTER_OTLP_HEADERS, problems),
    ...parsePairs('OTEL_EXPORTER_OTLP_TRACES_HEADERS', vars.OTEL_EXPORTER_OTLP_TRACES_HEADERS, problems),
  };
  const timeoutSetting = firstSet(vars, ['OTEL_EXPORTER_OTLP_TRACES_TIMEOUT', 'OTEL_EXPORTER_OTLP_TIMEOUT']);
  const timeoutMs = parseWholeNumber(
    timeoutSetting?.name ?? 'OTEL_EXPORTER_OTLP_TIMEOUT',
    timeoutSetting?.value,
    { fallback: 10_000, min: 1, max: 600_000 },
    problems,
  );

  const resource = parsePairs('OTEL_RESOURCE_ATTRIBUTES', vars.OTEL_RESOURCE_ATTRIBUTES, problems);
  const serviceName = (vars.OTEL_SERVICE_NAME ?? '').trim();
  resource['service.name'] =
    serviceName !== '' ? serviceName : (resource['service.name'] ?? DEFAULT_SERVICE_NAME);

  const samplerSetting = (vars.OTEL_TRACES_SAMPLER ?? '').trim().toLowerCase();
  const sampler = (samplerSetting === '' ? 'parentbased_always_on' : samplerSetting) as TraceSampler;
  if (!TRACE_SAMPLERS.includes(sampler)) {
    problems.push(
      `OTEL_TRACES_SAMPLER must be one of ${TRACE_SAMPLERS.join(', ')} (got "${vars.OTEL_TRACES_SAMPLER}")`,
    );
  }
  let ratio = 1;
  const ratioSetting = (vars.OTEL_TRACES_SAMPLER_ARG ?? '').trim();
  if (sampler.endsWith('traceidratio') && ratioSetting !== '') {
    ratio = /^(0(\.\d+)?|1(\.0+)?|\.\d+)$/.test(ratioSetting) ? Number(ratioSetting) : Number.NaN;
    if (Number.isNaN(ratio)) {
      problems.push(
        `OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, e.g. 0.1 (got "${vars.OTEL_TRACES_SAMPLER_ARG}")`,
      );
    }
  }

  const scheduleDelayMs = parseWholeNumber(
    'OTEL_BSP_SCHEDULE_DELAY',
    vars.OTEL_BSP_SCHEDULE_DELAY,
    { fallback: 5000, min: 1, max: 600_000 },
    problems,
  );
  const maxQueueSize = parseWholeNumber(
    'OTEL_BSP_MAX_QUEUE_SIZE',
    vars.OTEL_BSP_MAX_QUEUE_SIZE,
    { fallback: 2048, min: 1, max: 1_000_000 },
    problems,
  );
  if (problems.length > before) return null;
  return { endpoint, protocol, headers, timeoutMs, resource, sampler, ratio, scheduleDelayMs, maxQueueSize };
}

/**
 * How the loader reads a variable, with its bounds: the loader, the README's configuration table
 * (`scripts/config-table.ts`) and `safety-api serve --help` take them from here.
 */
type Reading =
  | { kind: 'port'; lowest: number }
  | { kind: 'number'; min: number; max: number; unit: string }
  | { kind: 'boolean' }
  | { kind: 'choice'; values: readonly string[] }
  /** Read by a parser of its own below (a URL, a key, a list). */
  | { kind: 'text' }
  /** A family of variables, one row in the table (OpenTelemetry's). */
  | { kind: 'family'; names: readonly string[] };

/** One environment variable of the server and the CLI, declared once. */
export interface EnvironmentVariable {
  /** Its default as an operator writes it; `null`: unset. */
  default: string | null;
  /** One line: what it sets (`serve --help` shows this line; the README adds `more`). */
  doc: string;
  more?: string;
  reading: Reading;
}

/** Every variable the configuration reads, in the README's order (`CONFIG_VARIABLES` lists OTEL_* one by one). */
export const ENVIRONMENT = {
  PORT: { default: '8080', doc: 'TCP port', reading: { kind: 'port', lowest: 0 } },
  HOST: { default: '0.0.0.0', doc: 'interface to listen on', reading: { kind: 'text' } },
  BASE_URL: {
    default: 'http://localhost:$PORT',
    doc: 'public origin (`http(s)://…`, no path); the OAuth issuer and secure cookies derive from it',
    reading: { kind: 'text' },
  },
  DATABASE_URL: {
    default: DEFAULT_DATABASE_URL,
    doc: '`sqlite:PATH` (embedded, WAL) or `postgres://…`',
    reading: { kind: 'text' },
  },
  MIGRATION_DATABASE_URL: {
    default: 'DATABASE_URL',
    doc: 'PostgreSQL only: where migrations run, when `DATABASE_URL` goes through a transaction-mode pooler',
    more: 'the same database reached directly or through a session-mode pool ([docs/operations.md](docs/operations.md#postgresql-connection-pooling))',
    reading: { kind: 'text' },
  },
  MIGRATE_ON_START: {
    default: 'true',
    doc: '`serve` applies pending migrations before it listens',
    more: '`false`: it applies none, and a pending migration stops it with one line naming `safety-api migrate` (run it first, with the new release: [docs/deployment.md](docs/deployment.md#upgrades))',
    reading: { kind: 'boolean' },
  },
  REDIS_URL: {
    default: null,
    doc: '`redis://…` or `rediss://…`: rate-limit counts shared by every instance',
    more: "`redis+sentinel://[[user]:password@]host:port,host:port,…/master-name[?db=N]`: the same through the primary the Sentinels name (port 26379 by default; the password is the primary's and replicas', the Sentinels are asked without one), followed to the replica they promote; unset: counted in process memory",
    reading: { kind: 'text' },
  },
  LOG_LEVEL: { default: 'info', doc: 'how much is logged', reading: { kind: 'choice', values: LOG_LEVELS } },
  OAUTH_JWKS: {
    default: null,
    doc: 'private JWK set signing OAuth tokens; unset: generated once and kept in the database',
    reading: { kind: 'text' },
  },
  OAUTH_COOKIE_KEYS: {
    default: null,
    doc: 'comma-separated secrets (≥ 32 characters) signing OAuth cookies; unset: generated once and kept',
    reading: { kind: 'text' },
  },
  TRUST_PROXY: {
    default: null,
    doc: 'comma-separated addresses or CIDRs of load balancers whose `X-Forwarded-For` is believed',
    more: "unset: the connection's address is the client's",
    reading: { kind: 'text' },
  },
  METRICS_PORT: {
    default: null,
    doc: 'serve `/metrics` on this port only, not on `PORT`',
    more: 'unset: `/metrics` is on `PORT`',
    reading: { kind: 'port', lowest: 1 },
  },
  METRICS_HOST: {
    default: '127.0.0.1',
    doc: 'interface of the metrics listener (with `METRICS_PORT`)',
    reading: { kind: 'text' },
  },
  CHANGES_RETENTION_DAYS: {
    default: String(DEFAULT_CHANGES_RETENTION_DAYS),
    doc: 'days a deletion stays in the changes feed and a feed cursor stays valid (a number > 0)',
    reading: { kind: 'text' },
  },
  WEBHOOKS_ALLOW_PRIVATE: {
    default: 'false',
    doc: '`true` lets webhook endpoints be `http://` and on private addresses: tests and development only',
    more: 'a warning is logged at start',
    reading: { kind: 'boolean' },
  },
  WEBHOOK_TIMEOUT_MS: {
    default: '10000',
    doc: 'how long a receiver may take to answer a webhook delivery, from its connection; getting the connection is bounded by the same time',
    reading: { kind: 'number', min: 100, max: 60_000, unit: 'milliseconds' },
  },
  WEBHOOK_DISABLE_AFTER_HOURS: {
    default: '72',
    doc: 'an endpoint failing this long is disabled, with the reason',
    reading: { kind: 'number', min: 0.0001, max: 8760, unit: 'hours' },
  },
  WEBHOOK_LEASE_SECONDS: {
    default: '30',
    doc: "how long an instance's claim on an endpoint lasts unless renewed: another instance takes over this long after its holder died",
    more: 'at least twice `WEBHOOK_TIMEOUT_MS`, or the server refuses to start',
    reading: { kind: 'number', min: 1, max: 3600, unit: 'seconds' },
  },
  WEBHOOK_SECRETS_KEY: {
    default: null,
    doc: '32 bytes (base64) that encrypt webhook signing secrets at rest; unset: a key generated once and kept in the database',
    more: 'set it before the first endpoint is created',
    reading: { kind: 'text' },
  },
  CACHE_MAX_MB: {
    default: String(DEFAULT_CACHE_MAX_MB),
    doc: "MiB that the server's in-process caches may hold together, each its share in bytes",
    more: "response bodies ½, SQLite's page cache ¼, rank maps ⅛, key rows 1/16, rate-limit windows and prepared SQLite statements 1/64 each",
    reading: { kind: 'number', min: MIN_CACHE_MAX_MB, max: 65_536, unit: 'MiB' },
  },
  'OTEL_*': {
    default: null,
    doc: 'OpenTelemetry traces by OTLP/HTTP (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_TRACES_SAMPLER`, …); off unless an exporter is configured',
    more: 'see [docs/deployment.md](docs/deployment.md#tracing)',
    reading: { kind: 'family', names: OTEL_VARIABLES },
  },
} as const satisfies Record<string, EnvironmentVariable>;

type Declared = typeof ENVIRONMENT;
type NamesOf<Kind> = {
  [N in keyof Declared]: Declared[N]['reading'] extends { kind: Kind } ? N : never;
}[keyof Declared];

/** A port variable, within its declared bounds; its default when unset (`null`: none). */
function readPort(env: NodeJS.ProcessEnv, name: NamesOf<'port'>, problems: string[]): number | null {
  const { default: fallback, reading } = ENVIRONMENT[name];
  const raw = env[name];
  const unset = fallback === null ? null : Number(fallback);
  if (raw === undefined || raw === '') return unset;
  return parsePort(name, raw, reading.lowest, problems) ?? unset;
}

/** A number variable (fractions allowed), within its declared bounds; its default when unset. */
function readNumber(env: NodeJS.ProcessEnv, name: NamesOf<'number'>, problems: string[]): number {
  const { default: fallback, reading } = ENVIRONMENT[name];
  return parseNumber(name, env[name], { ...reading, fallback: Number(fallback) }, problems);
}

/** A true/false variable; its default when unset. */
function readBoolean(env: NodeJS.ProcessEnv, name: NamesOf<'boolean'>, problems: string[]): boolean {
  return parseBoolean(name, env[name], problems, ENVIRONMENT[name].default === 'true');
}

/** A text variable as given, or its declared default when unset. */
function readText(env: NodeJS.ProcessEnv, name: 'HOST' | 'METRICS_HOST'): string {
  const raw = env[name];
  return raw === undefined || raw === '' ? ENVIRONMENT[name].default : raw;
}

/**
 * Every environment variable `loadConfig` reads: what a deployment may set. The deployment files
 * (compose.yaml, deploy/kubernetes) are checked against it (test/deploy), and it against this loader.
 */
export const CONFIG_VARIABLES: readonly string[] = Object.entries(ENVIRONMENT).flatMap(([name, variable]) =>
  variable.reading.kind === 'family' ? variable.reading.names : [name],
);

/** Reads and validates the environment; throws one ConfigError listing every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const problems: string[] = [];
  const port = readPort(env, 'PORT', problems) ?? Number(ENVIRONMENT.PORT.default);
  const host = readText(env, 'HOST');

  // Not 0 (its lowest is 1): a port picked at random is one no scraper could be told in advance.
  const metricsPort = readPort(env, 'METRICS_PORT', problems);
  if (metricsPort !== null && metricsPort === port)
    problems.push(`METRICS_PORT must differ from PORT (both are ${port})`);
  // Metrics tell how busy the service is and which routes exist: loopback unless the operator
  // chooses an address a scraper elsewhere can reach.
  const metricsHost = readText(env, 'METRICS_HOST');
  if ((env.METRICS_PORT ?? '') === '' && (env.METRICS_HOST ?? '') !== '') {
    problems.push('METRICS_HOST needs METRICS_PORT: without it /metrics is served on the main port');
  }

  let baseUrl = `http://localhost:${port}`;
  if (env.BASE_URL !== undefined && env.BASE_URL !== '') {
    baseUrl = parseUrl('BASE_URL', env.BASE_URL, ['http:', 'https:'], problems).replace(/\/+$/, '');
  }

  const databaseUrl = parseDatabaseUrl(env.DATABASE_URL, problems);
  let migrationDatabaseUrl = databaseUrl;
  if (env.MIGRATION_DATABASE_URL !== undefined && env.MIGRATION_DATABASE_URL !== '') {
    if (databaseUrl.startsWith('sqlite:')) {
      problems.push('MIGRATION_DATABASE_URL is for PostgreSQL only: DATABASE_URL is a SQLite file');
    } else {
      migrationDatabaseUrl = parseUrl(
        'MIGRATION_DATABASE_URL',
        env.MIGRATION_DATABASE_URL,
        ['postgres:', 'postgresql:'],
        problems,
      );
    }
  }

  const migrateOnStart = readBoolean(env, 'MIGRATE_ON_START', problems);

  let redisUrl: string | null = null;
  if (env.REDIS_URL !== undefined && env.REDIS_URL !== '') {
    parseRedisUrl(env.REDIS_URL, problems);
    redisUrl = env.REDIS_URL;
  }

  let logLevel: LogLevel = ENVIRONMENT.LOG_LEVEL.default;
  if (env.LOG_LEVEL !== undefined && env.LOG_LEVEL !== '') {
    const given = LOG_LEVELS.find((level) => level === env.LOG_LEVEL);
    if (given !== undefined) logLevel = given;
    else problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got "${env.LOG_LEVEL}")`);
  }

  const oauthJwks = parseOauthJwks(env.OAUTH_JWKS, problems);
  const oauthCookieKeys = parseOauthCookieKeys(env.OAUTH_COOKIE_KEYS, problems);
  const trustProxy = parseTrustProxy(env.TRUST_PROXY, problems);
  const changesRetentionDays = parseRetentionDays(env.CHANGES_RETENTION_DAYS, problems);
  const webhooksAllowPrivate = readBoolean(env, 'WEBHOOKS_ALLOW_PRIVATE', problems);
  const webhookTimeoutMs = Math.round(readNumber(env, 'WEBHOOK_TIMEOUT_MS', problems));
  const webhookDisableAfterHours = readNumber(env, 'WEBHOOK_DISABLE_AFTER_HOURS', problems);
  const webhookLeaseSeconds = readNumber(env, 'WEBHOOK_LEASE_SECONDS', problems);
  const webhookSecretsKey = parseSecretsKey(env.WEBHOOK_SECRETS_KEY, problems);
  const cacheMaxMb = readNumber(env, 'CACHE_MAX_MB', problems);
  const tracing = parseTracing(env, problems);
  // A POST must end before the lease that allows it can run out, with a renewal in between.
  if (webhookLeaseSeconds * 1000 < 2 * webhookTimeoutMs) {
    problems.push(
      `WEBHOOK_LEASE_SECONDS must be at least twice WEBHOOK_TIMEOUT_MS (${webhookLeaseSeconds} s against ${webhookTimeoutMs} ms)`,
    );
  }

  if (problems.length > 0) throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  return {
    port,
    host,
    baseUrl,
    databaseUrl,
    migrationDatabaseUrl,
    migrateOnStart,
    redisUrl,
    logLevel,
    oauthJwks,
    oauthCookieKeys,
    trustProxy,
    metricsPort,
    metricsHost,
    changesRetentionDays,
    webhooksAllowPrivate,
    webhookTimeoutMs,
    webhookDisableAfterHours,
    webhookLeaseSeconds,
    webhookSecretsKey,
    cacheMaxMb,
    tracing,
  };
}
