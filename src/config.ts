import { isIP } from 'node:net';
import { Type } from 'typebox';
import { Value } from 'typebox/value';

/**
 * The configuration as one schema. Every environment variable the server and the CLI read is
 * declared once, in `ENVIRONMENT` (OpenTelemetry's in `TRACING`): its default, its bounds or
 * allowed values, the line that says what it sets, and the reading that holds it to them. The
 * loader (`loadConfig`), the `Config` type, the README's configuration table and
 * docs/deployment.md's tracing table (scripts/config-table.ts, `npm run docs:config`) and
 * `safety-api serve --help` all come from those declarations. Every process reads its settings
 * through `loadConfig`, so a bad value is reported the same way everywhere: one line naming every
 * bad variable.
 */

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** What a reading is told of the variable it reads: its name (of a pair, the one set) and its default as written. */
interface Variable {
  name: string;
  default: string | null;
}

/** A set variable's text to its value; `undefined` once a line saying what is wrong is in `problems`. */
type Read<T> = (raw: string, variable: Variable, problems: string[]) => T | undefined;

/** The form of a variable's value, as the docs give it: a kind, and its bounds or allowed values. */
type Form =
  | { kind: 'port'; lowest: number }
  /** Fractions allowed; `rounded`: then rounded to a whole number. */
  | { kind: 'number'; min: number; max: number; unit: string; rounded?: boolean }
  | { kind: 'whole'; min: number; max: number }
  | { kind: 'ratio' }
  | { kind: 'boolean' }
  | { kind: 'choice'; values: readonly string[] }
  | { kind: 'url'; protocols: readonly string[] }
  /** Comma-separated `name=value` pairs. */
  | { kind: 'pairs' }
  /** Text as given, or read by a reader of its own (a key, a list, a JSON value). */
  | { kind: 'text' };

interface Reader<T> {
  read: Read<T>;
  /** Spaces around the value do not count, and a blank one is unset (OpenTelemetry's way). */
  trim?: boolean;
  /** Its value when unset, for a variable without a default; `null` when not given. */
  empty?: () => T;
}

/** How a variable is read: its form, and the reader that holds its text to that form. */
export type Reading<T = unknown> = Form & Reader<T>;
type ReadingOf<Kind extends Form['kind'], T> = Extract<Form, { kind: Kind }> & Reader<T>;

/** Whether `raw` sets a variable: present and not empty (nor blank, for a reading that trims). */
function isSet(reading: { trim?: boolean }, raw: string | undefined): raw is string {
  return raw !== undefined && (reading.trim === true ? raw.trim() : raw) !== '';
}

/** A variable's default, read like a value of it: what the variable takes when unset or bad. */
function readDefault<T>(reading: Reader<T>, name: string, text: string): T {
  const problems: string[] = [];
  const value = reading.read(text, { name, default: text }, problems);
  if (value === undefined)
    throw new Error(`the default of ${name} is not a value of it: ${problems.join('; ')}`);
  return value;
}

function port(lowest: number): ReadingOf<'port', number> {
  return {
    kind: 'port',
    lowest,
    read: (raw, { name }, problems) => {
      if (/^\d+$/.test(raw) && Number(raw) >= lowest && Number(raw) <= 65535) return Number(raw);
      problems.push(`${name} must be an integer from ${lowest} to 65535 (got "${raw}")`);
      return undefined;
    },
  };
}

function number(form: Omit<Extract<Form, { kind: 'number' }>, 'kind'>): ReadingOf<'number', number> {
  const { min, max, unit, rounded = false } = form;
  return {
    kind: 'number',
    ...form,
    read: (raw, variable, problems) => {
      const value = /^\d{1,9}(\.\d{1,9})?$/.test(raw) ? Number(raw) : Number.NaN;
      if (value >= min && value <= max) return rounded ? Math.round(value) : value;
      problems.push(
        `${variable.name} must be a number of ${unit} from ${min} to ${max}, e.g. ${variable.default} (got "${raw}")`,
      );
      return undefined;
    },
  };
}

/** A whole number of milliseconds or items. */
function whole(min: number, max: number): ReadingOf<'whole', number> {
  return {
    kind: 'whole',
    min,
    max,
    read: (raw, variable, problems) => {
      const value = /^\d{1,9}$/.test(raw) ? Number(raw) : Number.NaN;
      if (value >= min && value <= max) return value;
      problems.push(
        `${variable.name} must be a whole number from ${min} to ${max}, e.g. ${variable.default} (got "${raw}")`,
      );
      return undefined;
    },
  };
}

/** A ratio from 0 to 1 (OTEL_TRACES_SAMPLER_ARG). */
function ratio(): ReadingOf<'ratio', number> {
  return {
    kind: 'ratio',
    trim: true,
    read: (raw, { name }, problems) => {
      if (/^(0(\.\d+)?|1(\.0+)?|\.\d+)$/.test(raw.trim())) return Number(raw.trim());
      problems.push(`${name} must be a ratio from 0 to 1, e.g. 0.1 (got "${raw}")`);
      return undefined;
    },
  };
}

/** `true` or `1`, `false` or `0`. */
function boolean(): ReadingOf<'boolean', boolean> {
  return {
    kind: 'boolean',
    read: (raw, { name }, problems) => {
      if (raw === 'false' || raw === '0') return false;
      if (raw === 'true' || raw === '1') return true;
      problems.push(`${name} must be true or false (got "${raw}")`);
      return undefined;
    },
  };
}

/**
 * One of `values`. `padded`: spaces around it do not count (`trim`: nor is a blank one set);
 * `caseless`: nor does the case of its letters; `note`: what a refusal adds, given the value.
 */
function choice<V extends string>(
  values: readonly V[],
  {
    trim = false,
    padded = trim,
    caseless = false,
    note,
  }: {
    trim?: boolean;
    padded?: boolean;
    caseless?: boolean;
    note?: (value: string) => string | undefined;
  } = {},
): ReadingOf<'choice', V> {
  return {
    kind: 'choice',
    values,
    trim,
    read: (raw, { name }, problems) => {
      const trimmed = padded ? raw.trim() : raw;
      const text = caseless ? trimmed.toLowerCase() : trimmed;
      const value = values.find((allowed) => allowed === text);
      if (value !== undefined) return value;
      const allowed = values.length === 2 ? values.join(' or ') : `one of ${values.join(', ')}`;
      const why = note?.(text);
      problems.push(`${name} must be ${allowed} (got "${raw}")${why === undefined ? '' : `: ${why}`}`);
      return undefined;
    },
  };
}

/** What is wrong with `raw` as a URL of one of `protocols` (`http:`…), if anything. */
function urlProblem(name: string, raw: string, protocols: readonly string[]): string | undefined {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return `${name} must be a URL (got "${raw}")`;
  }
  if (protocols.includes(url.protocol)) return undefined;
  return `${name} must start with ${protocols.map((p) => `${p}//`).join(' or ')} (got "${raw}")`;
}

/** A URL of one of `protocols`, as given; `withoutTrailingSlash`: its trailing slashes cut. */
function url(protocols: readonly string[], { withoutTrailingSlash = false } = {}): ReadingOf<'url', string> {
  return {
    kind: 'url',
    protocols,
    read: (raw, { name }, problems) => {
      const problem = urlProblem(name, raw, protocols);
      if (problem === undefined) return withoutTrailingSlash ? raw.replace(/\/+$/, '') : raw;
      problems.push(problem);
      return undefined;
    },
  };
}

function text({ trim = false } = {}): ReadingOf<'text', string> {
  return { kind: 'text', trim, read: (raw) => (trim ? raw.trim() : raw) };
}

/** Read by a reader of its own (a key, a list, a JSON value), below. */
function own<T>(read: Read<T>): ReadingOf<'text', T> {
  return { kind: 'text', read };
}

/**
 * `name=value` pairs separated by commas, values percent-encoded (OTEL_EXPORTER_OTLP_HEADERS,
 * OTEL_RESOURCE_ATTRIBUTES). A problem names the variable and the entry's place, never its value:
 * headers carry the collector's credentials.
 */
function pairs(): ReadingOf<'pairs', Record<string, string>> {
  return {
    kind: 'pairs',
    trim: true,
    read: (raw, { name }, problems) => {
      const read: Record<string, string> = {};
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
          return undefined;
        }
        read[key] = value;
      }
      return read;
    },
  };
}

// The readers of one variable each, for the declarations below.

export const DEFAULT_DATABASE_URL = 'sqlite:./data/safety-api.db';

const readDatabaseUrl: Read<string> = (raw, variable, problems) => {
  if (raw.startsWith('sqlite:')) {
    if (raw.length === 'sqlite:'.length)
      problems.push(`${variable.name} "sqlite:" needs a file path, e.g. ${variable.default}`);
  } else if (raw.startsWith('postgres://') || raw.startsWith('postgresql://')) {
    const problem = urlProblem(variable.name, raw, ['postgres:', 'postgresql:']);
    if (problem !== undefined) problems.push(problem);
  } else {
    problems.push(`${variable.name} must be sqlite:PATH or postgres://… (got "${raw}")`);
  }
  // As given even when wrong: MIGRATION_DATABASE_URL's rule asks whether it names a SQLite file.
  return raw;
};

const readRedisUrl: Read<string> = (raw, _variable, problems) => {
  parseRedisUrl(raw, problems);
  return raw;
};

/** A private JSON Web Key Set: at least one key, each with its type (`kty`) and its private part (`d`). */
const PRIVATE_JWKS = Type.Object({
  keys: Type.Array(Type.Object({ kty: Type.String(), d: Type.Unknown() }), { minItems: 1 }),
});

const readJwks: Read<{ keys: { kty: string; d: unknown }[] }> = (raw, { name }, problems) => {
  let jwks: unknown;
  try {
    jwks = JSON.parse(raw);
  } catch {
    problems.push(`${name} must be a JSON Web Key Set (JSON)`);
    return undefined;
  }
  if (Value.Check(PRIVATE_JWKS, jwks)) return { keys: jwks.keys };
  problems.push(`${name} must be {"keys":[…]} with at least one private key (kty and d)`);
  return undefined;
};

const MIN_COOKIE_KEY_LENGTH = 32;

const readCookieKeys: Read<string[]> = (raw, { name }, problems) => {
  const keys = raw.split(',').map((k) => k.trim());
  if (keys.every((k) => k.length >= MIN_COOKIE_KEY_LENGTH)) return keys;
  problems.push(`${name} must be comma-separated secrets of at least ${MIN_COOKIE_KEY_LENGTH} characters`);
  return undefined;
};

/** One TRUST_PROXY entry: an IPv4 or IPv6 address, optionally with a /prefix length. */
function isAddressOrCidr(entry: string): boolean {
  const [address = '', prefix, ...rest] = entry.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}

const readAddresses: Read<string[]> = (raw, { name }, problems) => {
  const entries = raw.split(',').map((entry) => entry.trim());
  const bad = entries.filter((entry) => !isAddressOrCidr(entry));
  if (bad.length === 0) return entries;
  problems.push(
    `${name} must be comma-separated IP addresses or CIDRs, e.g. 10.0.0.0/8,::1 (not ${bad
      .map((entry) => `"${entry}"`)
      .join(', ')})`,
  );
  return undefined;
};

export const DEFAULT_CHANGES_RETENTION_DAYS = 400;

const readRetentionDays: Read<number> = (raw, variable, problems) => {
  const days = /^\d{1,6}(\.\d{1,9})?$/.test(raw) ? Number(raw) : Number.NaN;
  if (days > 0) return days;
  problems.push(`${variable.name} must be a number of days above 0, e.g. ${variable.default} (got "${raw}")`);
  return undefined;
};

const SMTP = ['smtp:', 'smtps:'] as const;

/** A problem never shows the value: it may hold the SMTP password. */
const readSmtpUrl: Read<string> = (raw, { name }, problems) => {
  const url = URL.parse(raw.trim());
  if (url !== null && (SMTP as readonly string[]).includes(url.protocol)) return raw.trim();
  problems.push(
    `${name} must be smtp://[user:password@]host[:port] or smtps://… (the value is not shown: it may hold a password)`,
  );
  return undefined;
};

const readSecretsKey: Read<Buffer> = (raw, { name }, problems) => {
  const key = /^[A-Za-z0-9+/_-]{43}=?$/.test(raw) ? Buffer.from(raw, 'base64') : Buffer.alloc(0);
  if (key.length === 32) return key;
  problems.push(`${name} must be 32 bytes in base64, e.g. the output of "openssl rand -base64 32"`);
  return undefined;
};

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
  const problem = urlProblem('REDIS_URL', raw, ['redis:', 'rediss:', 'redis+sentinel:']);
  if (problem === undefined) return { kind: 'server', url: raw };
  problems.push(problem);
  return null;
}

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
  /** Prepared SQLite statements per connection (src/db/sqlite/statement-cache.ts). */
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

const OTLP_PROTOCOLS = ['http/protobuf', 'http/json'] as const;

/** Where and how spans are exported, and which are kept (src/telemetry/), from the `TRACING` variables. */
export interface TracingSettings {
  /** The OTLP/HTTP URL spans are POSTed to, `/v1/traces` included. */
  endpoint: string;
  protocol: (typeof OTLP_PROTOCOLS)[number];
  /** Sent with every export (credentials of the collector, perhaps): never logged. */
  headers: Record<string, string>;
  /** How long one export may take before its spans are dropped. */
  timeoutMs: number;
  /** `service.name` and the other resource attributes (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES). */
  resource: Record<string, string>;
  sampler: TraceSampler;
  /** The ratio of the `…traceidratio` samplers (OTEL_TRACES_SAMPLER_ARG). */
  ratio: number;
  /** How long a finished span may wait before it is sent (OTEL_BSP_SCHEDULE_DELAY). */
  scheduleDelayMs: number;
  /** Finished spans held for export at most; past it new spans are dropped (OTEL_BSP_MAX_QUEUE_SIZE). */
  maxQueueSize: number;
}

/**
 * One of OpenTelemetry's variables, or a pair of them: the general form, then the `…_TRACES_…`
 * form, which wins when both are set. docs/deployment.md's tracing table gives one row to each.
 */
export interface TracingVariable<T = unknown> {
  names: readonly [string] | readonly [string, string];
  /** Its default as an operator writes it; `null`: unset. */
  default: string | null;
  doc: string;
  more?: string;
  reading: Reading<T>;
}

export const DEFAULT_SERVICE_NAME = 'safety-incident-api';
const HTTP = ['http:', 'https:'];

/** OpenTelemetry's standard variables, as far as this server uses them, in the order of their table. */
export const TRACING = {
  endpoint: {
    names: ['OTEL_EXPORTER_OTLP_ENDPOINT'],
    default: 'http://localhost:4318',
    doc: "base URL of the collector's OTLP/HTTP receiver, e.g. `http://otel-collector:4318` (`/v1/traces` is added)",
    more: 'setting it turns tracing on',
    reading: url(HTTP, { withoutTrailingSlash: true }),
  },
  tracesEndpoint: {
    names: ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'],
    default: null,
    doc: 'the traces URL itself, used as given',
    more: 'setting it turns tracing on',
    reading: url(HTTP),
  },
  exporter: {
    names: ['OTEL_TRACES_EXPORTER'],
    default: null,
    doc: 'the exporter of traces',
    more: '`otlp` turns tracing on (to the default endpoint when none is set), `none` turns it off',
    reading: choice(['otlp', 'none'], {
      trim: true,
      caseless: true,
      note: () => 'this server exports traces by OTLP/HTTP only',
    }),
  },
  disabled: {
    names: ['OTEL_SDK_DISABLED'],
    default: 'false',
    doc: 'whether tracing is off',
    more: '`true` turns it off, whatever else is set',
    reading: choice(['true', 'false'], { trim: true, caseless: true }),
  },
  protocol: {
    names: ['OTEL_EXPORTER_OTLP_PROTOCOL', 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'],
    default: 'http/protobuf',
    doc: 'how spans are sent',
    more: '`grpc` is refused (OTLP/HTTP only)',
    reading: choice(OTLP_PROTOCOLS, {
      padded: true,
      note: (value) => (value === 'grpc' ? 'this server exports by OTLP/HTTP only' : undefined),
    }),
  },
  headers: {
    names: ['OTEL_EXPORTER_OTLP_HEADERS', 'OTEL_EXPORTER_OTLP_TRACES_HEADERS'],
    default: null,
    doc: "`name=value,…`, values percent-encoded: the collector's credentials, for instance",
    more: 'never logged, not even when malformed; the two are merged, the second winning for a name in both',
    reading: pairs(),
  },
  timeoutMs: {
    names: ['OTEL_EXPORTER_OTLP_TIMEOUT', 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT'],
    default: '10000',
    doc: 'milliseconds one export may take',
    more: 'past it its spans are dropped',
    reading: whole(1, 600_000),
  },
  serviceName: {
    names: ['OTEL_SERVICE_NAME'],
    default: DEFAULT_SERVICE_NAME,
    doc: "the resource's `service.name`",
    more: '`service.name` in `OTEL_RESOURCE_ATTRIBUTES` when unset',
    reading: text({ trim: true }),
  },
  resource: {
    names: ['OTEL_RESOURCE_ATTRIBUTES'],
    default: null,
    doc: 'more resource attributes, `name=value,…` (`deployment.environment=prod`)',
    reading: pairs(),
  },
  sampler: {
    names: ['OTEL_TRACES_SAMPLER'],
    default: 'parentbased_always_on',
    doc: 'which traces are kept',
    more: "under a `parentbased_…` sampler, a request that arrives with a `traceparent` follows its caller's decision",
    reading: choice(TRACE_SAMPLERS, { trim: true, caseless: true }),
  },
  ratio: {
    names: ['OTEL_TRACES_SAMPLER_ARG'],
    default: '1',
    doc: 'the ratio of the `traceidratio` samplers, from 0 to 1 (`0.1`: one trace in ten)',
    more: 'not read under the other samplers',
    reading: ratio(),
  },
  scheduleDelayMs: {
    names: ['OTEL_BSP_SCHEDULE_DELAY'],
    default: '5000',
    doc: 'milliseconds a finished span may wait before it is sent',
    reading: whole(1, 600_000),
  },
  maxQueueSize: {
    names: ['OTEL_BSP_MAX_QUEUE_SIZE'],
    default: '2048',
    doc: 'finished spans waiting to be sent at most',
    more: 'more are dropped',
    reading: whole(1, 1_000_000),
  },
} as const satisfies Record<string, TracingVariable>;

const TRACING_NAMES: readonly string[] = Object.values(TRACING).flatMap(({ names }) => names);

/**
 * Tracing, from OpenTelemetry's variables. It is on when an exporter is configured:
 * OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint; OTEL_TRACES_EXPORTER=none and
 * OTEL_SDK_DISABLED=true turn it off. The rest is checked only when tracing is on: a value the
 * server does not use stops nothing.
 */
function readTracing(env: NodeJS.ProcessEnv, problems: string[]): TracingSettings | null {
  // Every variable is read, on or off: CONFIG_VARIABLES names them all.
  const raw = new Map(TRACING_NAMES.map((name) => [name, env[name]]));
  /** Which of its names is set, the `…_TRACES_…` form first. */
  const setName = ({ names, reading }: TracingVariable) =>
    names.findLast((name) => isSet(reading, raw.get(name)));
  /** Its value under `name` when set there, and good. */
  const at = <T>(
    { default: fallback, reading }: { default: string | null; reading: Reader<T> },
    name?: string,
  ) => {
    const text = name === undefined ? undefined : raw.get(name);
    return name !== undefined && isSet(reading, text)
      ? reading.read(text, { name, default: fallback }, problems)
      : undefined;
  };
  const given = <T>(variable: TracingVariable<T>) => at(variable, setName(variable));
  const fallback = <T>({ names, default: text, reading }: TracingVariable<T> & { default: string }) =>
    readDefault(reading, names[0], text);
  const value = <T>(variable: TracingVariable<T> & { default: string }) =>
    given(variable) ?? fallback(variable);

  const before = problems.length;
  const disabled = value(TRACING.disabled);
  if (problems.length > before) return null;
  const exporter = given(TRACING.exporter);
  if (problems.length > before) return null;
  if (disabled === 'true' || exporter === 'none') return null;
  const tracesEndpoint = setName(TRACING.tracesEndpoint);
  if (exporter !== 'otlp' && tracesEndpoint === undefined && setName(TRACING.endpoint) === undefined)
    return null;

  // The traces endpoint is used as given; the general one is a base that `/v1/traces` is added to.
  const endpoint =
    tracesEndpoint === undefined
      ? `${value(TRACING.endpoint)}/v1/traces`
      : at(TRACING.tracesEndpoint, tracesEndpoint);
  const protocol = value(TRACING.protocol);
  // Both forms, merged: the traces form wins for a name in both.
  const [general, traces] = TRACING.headers.names;
  const headers = { ...at(TRACING.headers, general), ...at(TRACING.headers, traces) };
  const timeoutMs = value(TRACING.timeoutMs);
  const attributes = given(TRACING.resource) ?? {};
  const resource = {
    ...attributes,
    'service.name': given(TRACING.serviceName) ?? attributes['service.name'] ?? DEFAULT_SERVICE_NAME,
  };
  const sampler = value(TRACING.sampler);
  const ratio = sampler.endsWith('traceidratio') ? value(TRACING.ratio) : fallback(TRACING.ratio);
  const scheduleDelayMs = value(TRACING.scheduleDelayMs);
  const maxQueueSize = value(TRACING.maxQueueSize);
  if (problems.length > before || endpoint === undefined) return null;
  return { endpoint, protocol, headers, timeoutMs, resource, sampler, ratio, scheduleDelayMs, maxQueueSize };
}

/** The family of OpenTelemetry's variables: one row in the README, read together. */
interface Family<T> {
  kind: 'family';
  variables: Record<string, TracingVariable>;
  readFrom: (env: NodeJS.ProcessEnv, problems: string[]) => T;
}

/** One environment variable of the server and the CLI (or a family of them), declared once. */
export interface EnvironmentVariable {
  /** The field of `Config` that holds its value. */
  field: string;
  /** Its default as an operator writes it; `null`: unset. */
  default: string | null;
  /** One line: what it sets (`serve --help` shows this line; the README adds its bounds and `more`). */
  doc: string;
  more?: string;
  reading: Reading | Family<unknown>;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * Every variable the configuration reads, in the README's order, which is the order they are read
 * in and their problems reported in: a rule (`RULES`) reads only variables declared before its own.
 */
export const ENVIRONMENT = {
  PORT: { field: 'port', default: '8080', doc: 'TCP port', reading: port(0) },
  HOST: { field: 'host', default: '0.0.0.0', doc: 'interface to listen on', reading: text() },
  METRICS_PORT: {
    field: 'metricsPort',
    default: null,
    doc: 'serve `/metrics` on this port only, not on `PORT`',
    more: 'unset: `/metrics` is on `PORT`',
    // Not 0: a port picked at random is one no scraper could be told in advance.
    reading: port(1),
  },
  METRICS_HOST: {
    field: 'metricsHost',
    // Metrics tell how busy the service is and which routes exist: loopback unless the operator
    // chooses an address a scraper elsewhere can reach.
    default: '127.0.0.1',
    doc: 'interface of the metrics listener (with `METRICS_PORT`)',
    reading: text(),
  },
  BASE_URL: {
    field: 'baseUrl',
    default: 'http://localhost:$PORT',
    doc: 'public origin (`http(s)://…`, no path); the OAuth issuer and secure cookies derive from it',
    reading: url(HTTP, { withoutTrailingSlash: true }),
  },
  DATABASE_URL: {
    field: 'databaseUrl',
    default: DEFAULT_DATABASE_URL,
    doc: '`sqlite:PATH` (embedded, WAL) or `postgres://…`',
    reading: own(readDatabaseUrl),
  },
  MIGRATION_DATABASE_URL: {
    field: 'migrationDatabaseUrl',
    default: 'DATABASE_URL',
    doc: 'PostgreSQL only: where migrations run, when `DATABASE_URL` goes through a transaction-mode pooler',
    more: 'the same database reached directly or through a session-mode pool ([docs/operations.md](docs/operations.md#postgresql-connection-pooling))',
    reading: url(['postgres:', 'postgresql:']),
  },
  MIGRATE_ON_START: {
    field: 'migrateOnStart',
    default: 'true',
    doc: '`serve` applies pending migrations before it listens',
    more: '`false`: it applies none, and a pending migration stops it with one line naming `safety-api migrate` (run it first, with the new release: [docs/deployment.md](docs/deployment.md#upgrades))',
    reading: boolean(),
  },
  REDIS_URL: {
    field: 'redisUrl',
    default: null,
    doc: '`redis://…` or `rediss://…`: rate-limit counts shared by every instance',
    more: "`redis+sentinel://[[user]:password@]host:port,host:port,…/master-name[?db=N]`: the same through the primary the Sentinels name (port 26379 by default; the password is the primary's and replicas', the Sentinels are asked without one), followed to the replica they promote; unset: counted in process memory",
    // As given (`parseRedisUrl` reads it again where the connection is made).
    reading: own(readRedisUrl),
  },
  LOG_LEVEL: { field: 'logLevel', default: 'info', doc: 'how much is logged', reading: choice(LOG_LEVELS) },
  OAUTH_JWKS: {
    field: 'oauthJwks',
    default: null,
    doc: 'private JWK set signing OAuth tokens; unset: generated once and kept in the database',
    reading: own(readJwks),
  },
  OAUTH_COOKIE_KEYS: {
    field: 'oauthCookieKeys',
    default: null,
    doc: 'comma-separated secrets (≥ 32 characters) signing OAuth cookies, newest first; unset: generated once and kept',
    reading: own(readCookieKeys),
  },
  TRUST_PROXY: {
    field: 'trustProxy',
    default: null,
    doc: 'comma-separated addresses or CIDRs of load balancers whose `X-Forwarded-For` is believed',
    more: "unset: the connection's address is the client's",
    reading: { kind: 'text', trim: true, read: readAddresses, empty: (): string[] => [] },
  },
  CHANGES_RETENTION_DAYS: {
    field: 'changesRetentionDays',
    default: String(DEFAULT_CHANGES_RETENTION_DAYS),
    // Fractions allowed, so that tests can use seconds.
    doc: 'days a deletion stays in the changes feed and a feed cursor stays valid (a number > 0)',
    reading: own(readRetentionDays),
  },
  WEBHOOKS_ALLOW_PRIVATE: {
    field: 'webhooksAllowPrivate',
    default: 'false',
    doc: '`true` lets webhook endpoints be `http://` and on private addresses: tests and development only',
    more: 'a warning is logged at start',
    reading: boolean(),
  },
  WEBHOOK_TIMEOUT_MS: {
    field: 'webhookTimeoutMs',
    default: '10000',
    doc: 'how long a receiver may take to answer a webhook delivery, from its connection; getting the connection is bounded by the same time',
    reading: number({ min: 100, max: 60_000, unit: 'milliseconds', rounded: true }),
  },
  WEBHOOK_DISABLE_AFTER_HOURS: {
    field: 'webhookDisableAfterHours',
    default: '72',
    doc: 'an endpoint failing this long is disabled, with the reason',
    reading: number({ min: 0.0001, max: 8760, unit: 'hours' }),
  },
  WEBHOOK_MAX_ENDPOINTS: {
    field: 'webhookMaxEndpoints',
    default: '20',
    doc: 'the most webhook endpoints one account may have; creating one more is refused',
    reading: whole(1, 1000),
  },
  WEBHOOK_LEASE_SECONDS: {
    field: 'webhookLeaseSeconds',
    default: '30',
    doc: "how long an instance's claim on an endpoint lasts unless renewed: another instance takes over this long after its holder died",
    more: 'at least twice `WEBHOOK_TIMEOUT_MS`, or the server refuses to start',
    reading: number({ min: 1, max: 3600, unit: 'seconds' }),
  },
  WEBHOOK_HOST_RATE: {
    field: 'webhookHostRate',
    default: '1000',
    doc: 'the most webhook POSTs a second to one destination host, from all endpoints together',
    more: 'counted by all instances together through Redis when `REDIS_URL` is set (each on its own without it, or while Redis fails); an event over it waits for the next second and is not counted as a failure',
    reading: whole(1, 100_000),
  },
  WEBHOOK_SECRETS_KEY: {
    field: 'webhookSecretsKey',
    default: null,
    doc: '32 bytes (base64) that encrypt webhook signing secrets at rest; unset: a key generated once and kept in the database',
    more: 'set it before the first endpoint is created',
    reading: own(readSecretsKey),
  },
  SMTP_URL: {
    field: 'smtpUrl',
    default: null,
    doc: "`smtp://[user:password@]host[:port]` or `smtps://…` (nodemailer's URL form): mail to Super Admins about failing webhook endpoints and expiring keys",
    more: 'unset: no mail, and a warning at start when webhook endpoints exist ([docs/operations.md](docs/operations.md#mail))',
    reading: { kind: 'url', protocols: SMTP, trim: true, read: readSmtpUrl },
  },
  MAIL_FROM: {
    field: 'mailFrom',
    default: 'safety-api@<host of BASE_URL>',
    doc: 'the sender of those mails',
    reading: text({ trim: true }),
  },
  CACHE_MAX_MB: {
    field: 'cacheMaxMb',
    default: String(DEFAULT_CACHE_MAX_MB),
    doc: "MiB that the server's in-process caches may hold together, each its share in bytes",
    more: "response bodies ½, SQLite's page cache ¼, rank maps ⅛, key rows 1/16, rate-limit windows and prepared SQLite statements 1/64 each",
    reading: number({ min: MIN_CACHE_MAX_MB, max: 65_536, unit: 'MiB' }),
  },
  'OTEL_*': {
    field: 'tracing',
    default: null,
    doc: 'OpenTelemetry traces by OTLP/HTTP (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_TRACES_SAMPLER`, …); off unless an exporter is configured',
    more: 'see [docs/deployment.md](docs/deployment.md#tracing)',
    // Off: `null`, and nothing of the tracing code is loaded (src/telemetry/).
    reading: { kind: 'family', variables: TRACING, readFrom: readTracing },
  },
} as const satisfies Record<string, EnvironmentVariable>;

type Declared = typeof ENVIRONMENT;
type VariableName = keyof Declared;
/** What a reading gives for a set variable. */
type ReadValue<R> = R extends Family<infer T> ? T : R extends { read: Read<infer T> } ? T : never;
/** What an unset variable without a default holds: `null`, unless its reading says. */
type EmptyValue<R> = R extends { empty: () => infer E } ? E : null;
type Value<N extends VariableName> = Declared[N]['default'] extends null
  ? ReadValue<Declared[N]['reading']> | EmptyValue<Declared[N]['reading']>
  : ReadValue<Declared[N]['reading']>;

/** The settings of a process: a field per declared variable, of the type its reading gives. */
export type Config = { -readonly [N in VariableName as Declared[N]['field']]: Value<N> };

/** What a rule is told: the values of the variables declared before its own, and which of them are set. */
interface Earlier {
  value: <N extends VariableName>(name: N) => Value<N>;
  isSet: (name: Exclude<VariableName, 'OTEL_*'>) => boolean;
}

/** How a variable depends on others declared before it. */
interface Rule<N extends VariableName> {
  /** Its value when unset (its declared `default` says it in words). */
  unset?: (earlier: Earlier) => Value<N>;
  /** Why it may not be set, given the others: it is then not read. */
  refuse?: (earlier: Earlier) => string | undefined;
  /** What is wrong with its value (read, or its default) against the others'. */
  check?: (earlier: Earlier) => string | undefined;
}

/** The rules between variables: each runs when its variable is read, and reports beside it. */
const RULES: { [N in VariableName]?: Rule<N> } = {
  METRICS_PORT: {
    check: ({ value }) => {
      const metricsPort = value('METRICS_PORT');
      return metricsPort !== null && metricsPort === value('PORT')
        ? `METRICS_PORT must differ from PORT (both are ${metricsPort})`
        : undefined;
    },
  },
  METRICS_HOST: {
    refuse: ({ isSet }) =>
      isSet('METRICS_PORT')
        ? undefined
        : 'METRICS_HOST needs METRICS_PORT: without it /metrics is served on the main port',
  },
  BASE_URL: { unset: ({ value }) => `http://localhost:${value('PORT')}` },
  MIGRATION_DATABASE_URL: {
    refuse: ({ value }) =>
      value('DATABASE_URL').startsWith('sqlite:')
        ? 'MIGRATION_DATABASE_URL is for PostgreSQL only: DATABASE_URL is a SQLite file'
        : undefined,
    unset: ({ value }) => value('DATABASE_URL'),
  },
  MAIL_FROM: { unset: ({ value }) => `safety-api@${new URL(value('BASE_URL')).hostname}` },
  WEBHOOK_LEASE_SECONDS: {
    // A POST must end before the lease that allows it can run out, with a renewal in between.
    check: ({ value }) => {
      const [lease, timeout] = [value('WEBHOOK_LEASE_SECONDS'), value('WEBHOOK_TIMEOUT_MS')];
      return lease * 1000 < 2 * timeout
        ? `WEBHOOK_LEASE_SECONDS must be at least twice WEBHOOK_TIMEOUT_MS (${lease} s against ${timeout} ms)`
        : undefined;
    },
  },
};

// The declared names, in their order (the guard only tells TypeScript what `Object.keys` returns).
const NAMES = Object.keys(ENVIRONMENT).filter((name): name is VariableName => name in ENVIRONMENT);

/**
 * Every environment variable `loadConfig` reads: what a deployment may set. The deployment files
 * (compose.yaml, deploy/kubernetes) are checked against it (test/deploy), and it against this loader.
 */
export const CONFIG_VARIABLES: readonly string[] = NAMES.flatMap((name) => {
  const { reading }: EnvironmentVariable = ENVIRONMENT[name];
  return reading.kind === 'family' ? Object.values(reading.variables).flatMap(({ names }) => names) : [name];
});

/** One variable's value: read when set (unless a rule refuses it), else (or when bad) what it takes unset. */
function readVariable(
  name: VariableName,
  env: NodeJS.ProcessEnv,
  problems: string[],
  earlier: Earlier,
): unknown {
  const { default: fallback, reading }: EnvironmentVariable = ENVIRONMENT[name];
  if (reading.kind === 'family') return reading.readFrom(env, problems);
  const rule = RULES[name];
  const raw = env[name];
  if (isSet(reading, raw)) {
    const refused = rule?.refuse?.(earlier);
    if (refused !== undefined) problems.push(refused);
    const value =
      refused === undefined ? reading.read(raw, { name, default: fallback }, problems) : undefined;
    if (value !== undefined) return value;
  }
  if (rule?.unset !== undefined) return rule.unset(earlier);
  if (fallback === null) return reading.empty === undefined ? null : reading.empty();
  return readDefault(reading, name, fallback);
}

/** Reads and validates the environment; throws one ConfigError listing every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const problems: string[] = [];
  const values = new Map<VariableName, unknown>();
  const earlier: Earlier = {
    value: <N extends VariableName>(name: N) => {
      if (!values.has(name)) throw new Error(`a rule asks for ${name}, which is declared after it`);
      // What `readVariable` made of N's declaration, whose reading is what `Value<N>` derives from.
      return values.get(name) as Value<N>;
    },
    isSet: (name) => isSet(ENVIRONMENT[name].reading, env[name]),
  };
  for (const name of NAMES) {
    values.set(name, readVariable(name, env, problems, earlier));
    const wrong = RULES[name]?.check?.(earlier);
    if (wrong !== undefined) problems.push(wrong);
  }
  if (problems.length > 0) throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  // Each field holds what its variable's declaration gave, which is what `Config` derives its types from.
  return Object.fromEntries(NAMES.map((name) => [ENVIRONMENT[name].field, values.get(name)])) as Config;
}
