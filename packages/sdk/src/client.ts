import { createRequire } from 'node:module';
import createFetchClient, { type Client } from 'openapi-fetch';
import { errorClassOf, type SafetyApiError } from './errors.ts';
import { caching, type EtagCache, MemoryEtagCache } from './etag-cache.ts';
import { type CsvRecord, csvRows, type ExportFormat, ExportStream, ndjsonRows } from './export-stream.ts';
import type { paths } from './generated/openapi.ts';
import { type Fetch, integerHeader, type RetryOptions, type Send, sender } from './retry.ts';
import type {
  ApiResult,
  Change,
  ChangesPage,
  Department,
  Incident,
  IncidentPagination,
  Location,
  RateLimit,
  RecordType,
  TypedRecord,
  User,
} from './types.ts';

export interface ClientOptions {
  /** The service's origin, e.g. `https://safety.example.com`: no path, no query. */
  baseUrl: string;
  /** `svc_` and 40 hex characters, from the admin panel. */
  apiKey: string;
  /** Defaults to the global `fetch`. */
  fetch?: Fetch;
  /**
   * How 429 and 503 answers, network failures and timeouts are retried; `false` sends each call
   * once and reports them at once.
   */
  retry?: RetryOptions | false;
  /**
   * Milliseconds each attempt of a call may take (default 30 000), its whole answer read (an
   * export: its headers); past it, the attempt is aborted and retried, and once `retry` is spent
   * the call rejects with a `TimeoutError`. `false`: no limit. A call may override it.
   */
  timeout?: number | false;
  /**
   * Keep the answers of GETs with their ETags and ask with `If-None-Match`: a 304 (free, not counted
   * against the allowance) is answered from the cache. `true`: a `MemoryEtagCache` of 8 MiB; or
   * an `EtagCache` of your own. Off by default.
   */
  cache?: boolean | EtagCache;
  /** Your application, named after the SDK in the `User-Agent` of every request. */
  appInfo?: { name: string; version?: string };
}

export interface CallOptions {
  /** Aborts the request, and any wait before a retry. */
  signal?: AbortSignal;
  /** This call's `timeout`, in place of the client's. */
  timeout?: number | false;
}

export interface ExportOptions extends CallOptions {
  /**
   * `ndjson` (the default): rows are the API's typed records. `csv`: rows are `CsvRecord`s, each
   * field as text under its column's name; the `body`, the file a spreadsheet opens.
   */
  format?: ExportFormat;
}

export interface SyncOptions extends CallOptions {
  /** The cursor `saveCursor` last received; none (or null) to start with a full export. */
  cursor?: string | null;
  /** A record that is new or changed: replace your copy. */
  onRecord(record: TypedRecord): void | Promise<void>;
  /** A record that left the public view: remove your copy. */
  onDelete(deletion: { type: RecordType; id: string }): void | Promise<void>;
  /** Called once the records before `cursor` are handed over; pass it back to resume. */
  saveCursor(cursor: string): void | Promise<void>;
}

/** The largest page of the feed: the fewest requests for `sync()`. */
const FEED_PAGE_SIZE = 1000;
/** The largest page of incidents the API serves: the fewest requests for `incidents()`. */
const INCIDENT_PAGE_SIZE = 200;
/** Long enough for the largest page on a slow link, short enough not to hang on a lost one. */
const DEFAULT_TIMEOUT_MS = 30_000;
/** The longest delay `setTimeout` takes (about 24.8 days). */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

const SDK_VERSION = (createRequire(import.meta.url)('../package.json') as { version: string }).version;

/** A product token of RFC 9110 (`name/version`): no space, slash or control character. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** `User-Agent`: the SDK, Node.js, then the application when `appInfo` names it. */
function userAgent(appInfo: ClientOptions['appInfo']): string {
  const parts = [`safety-incident-sdk/${SDK_VERSION}`, `node/${process.versions.node}`];
  if (appInfo !== undefined) {
    const { name, version } = appInfo;
    if (!TOKEN.test(name) || (version !== undefined && !TOKEN.test(version)))
      throw new TypeError(
        `appInfo: name and version must be single words of letters, digits and -._~ (got ${JSON.stringify(appInfo)})`,
      );
    parts.push(version === undefined ? name : `${name}/${version}`);
  }
  return parts.join(' ');
}

/** A `timeout` option as milliseconds, null for none, or a TypeError that says what is expected. */
function timeoutOf(timeout: unknown): number | null {
  if (timeout === false) return null;
  if (typeof timeout === 'number' && timeout > 0 && timeout <= MAX_TIMEOUT_MS) return timeout;
  throw new TypeError(
    `timeout must be a number of milliseconds above 0 and at most ${MAX_TIMEOUT_MS}, or false for none (got ${String(timeout)})`,
  );
}

/** The service's origin from `baseUrl`, or a TypeError that says what is expected. */
function originOf(baseUrl: unknown): string {
  const expected = "baseUrl must be the service's origin, e.g. https://safety.example.com";
  let url: URL;
  try {
    url = new URL(String(baseUrl));
  } catch {
    throw new TypeError(`${expected} (got ${JSON.stringify(baseUrl)})`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new TypeError(`${expected}: http:// or https:// (got ${JSON.stringify(baseUrl)})`);
  if (url.pathname !== '/' || url.search !== '' || url.hash !== '')
    throw new TypeError(
      `${expected}, without a path or query: the SDK adds /api/v1/public/… (got ${JSON.stringify(baseUrl)})`,
    );
  return url.origin;
}

function rateLimitOf(response: Response): RateLimit | null {
  const limit = integerHeader(response.headers, 'x-ratelimit-limit');
  const remaining = integerHeader(response.headers, 'x-ratelimit-remaining');
  if (limit === null || remaining === null) return null;
  return { limit, remaining, reset: integerHeader(response.headers, 'x-ratelimit-reset') };
}

function errorOf(response: Response, body: unknown): SafetyApiError {
  const ErrorClass = errorClassOf(response.status);
  return new ErrorClass(response.status, body, {
    requestId: response.headers.get('x-request-id'),
    retryAfter: integerHeader(response.headers, 'retry-after'),
    rateLimit: rateLimitOf(response),
  });
}

/** An upsert's record with its kind, or null for a delete (the only change without an object). */
function upserted(change: Change): TypedRecord | null {
  if (change.object === null) return null;
  // Each case narrows `change`, and with it the type of its object.
  switch (change.type) {
    case 'incident':
      return { type: change.type, object: change.object };
    case 'user':
      return { type: change.type, object: change.object };
    case 'department':
      return { type: change.type, object: change.object };
    case 'location':
      return { type: change.type, object: change.object };
  }
}

/** A client of the public API for one service and one API key. */
export class SafetyClient {
  readonly #api: Client<paths>;
  readonly #send: Send;
  readonly #timeout: number | false;

  constructor({
    baseUrl,
    apiKey,
    fetch = globalThis.fetch,
    retry = {},
    timeout = DEFAULT_TIMEOUT_MS,
    cache = false,
    appInfo,
  }: ClientOptions) {
    timeoutOf(timeout);
    this.#timeout = timeout;
    const send = sender(fetch, retry);
    this.#send = cache === false ? send : caching(send, cache === true ? new MemoryEtagCache() : cache);
    this.#api = createFetchClient<paths>({
      baseUrl: originOf(baseUrl),
      headers: { authorization: `Bearer ${apiKey}`, 'user-agent': userAgent(appInfo) },
    });
  }

  /**
   * A call's options for openapi-fetch: its signal, and the client's way of sending with the
   * call's timeout. `stream`: the body is handed over as it arrives (an export).
   */
  #sendOptions({ signal, timeout = this.#timeout }: CallOptions, stream: boolean) {
    return {
      signal,
      // Checked here, so that a wrong timeout rejects the call rather than throw.
      fetch: async (request: Request) => this.#send(request, { timeout: timeoutOf(timeout), stream }),
    };
  }

  /** One page of incidents, newest first. `limit` is at most 200 (larger is served as 200). */
  listIncidents(
    query: { page?: number; limit?: number } = {},
    options: CallOptions = {},
  ): Promise<ApiResult<{ data: Incident[]; pagination: IncidentPagination }>> {
    return this.#result(
      this.#api.GET('/api/v1/public/incidents', { params: { query }, ...this.#sendOptions(options, false) }),
    );
  }

  /** One incident; a SafetyApiError with status 404 when the account has none with that id. */
  getIncident(id: string, options: CallOptions = {}): Promise<ApiResult<Incident>> {
    return this.#result(
      this.#api.GET('/api/v1/public/incidents/{id}', {
        params: { path: { id } },
        ...this.#sendOptions(options, false),
      }),
    );
  }

  /** Every active user, by name. */
  listUsers(options: CallOptions = {}): Promise<ApiResult<User[]>> {
    return this.#result(this.#api.GET('/api/v1/public/users', this.#sendOptions(options, false)));
  }

  /** Every active department, by name. */
  listDepartments(options: CallOptions = {}): Promise<ApiResult<Department[]>> {
    return this.#result(this.#api.GET('/api/v1/public/departments', this.#sendOptions(options, false)));
  }

  /** Every active location, by name. */
  listLocations(options: CallOptions = {}): Promise<ApiResult<Location[]>> {
    return this.#result(this.#api.GET('/api/v1/public/locations', this.#sendOptions(options, false)));
  }

  /**
   * One page of the changes feed after `cursor` (none: from the beginning; `latest`: no changes,
   * the current position). Continue from `next_cursor` while `has_more`.
   */
  listChanges(
    query: { cursor?: string; limit?: number } = {},
    options: CallOptions = {},
  ): Promise<ApiResult<ChangesPage>> {
    return this.#result(
      this.#api.GET('/api/v1/public/changes', { params: { query }, ...this.#sendOptions(options, false) }),
    );
  }

  /**
   * Every incident, streamed from one snapshot: as typed records (`format: 'ndjson'`, the default)
   * or as CSV (`format: 'csv'`, rows as `CsvRecord`s); `body` is its bytes, to write to a file. Its
   * `cursor` (`X-Changes-Cursor`) continues with the changes feed. Iterate it to the end, or
   * `cancel()` it: an open export holds a snapshot on the server.
   */
  exportIncidents(options?: ExportOptions & { format?: 'ndjson' }): Promise<ExportStream<Incident>>;
  exportIncidents(options: ExportOptions & { format: 'csv' }): Promise<ExportStream<CsvRecord>>;
  exportIncidents(options?: ExportOptions): Promise<ExportStream<Incident> | ExportStream<CsvRecord>>;
  exportIncidents(options: ExportOptions = {}): Promise<ExportStream<Incident> | ExportStream<CsvRecord>> {
    return this.#exportOf<Incident>('incidents', options);
  }

  /** Every active user, streamed from one snapshot; see `exportIncidents`. */
  exportUsers(options?: ExportOptions & { format?: 'ndjson' }): Promise<ExportStream<User>>;
  exportUsers(options: ExportOptions & { format: 'csv' }): Promise<ExportStream<CsvRecord>>;
  exportUsers(options?: ExportOptions): Promise<ExportStream<User> | ExportStream<CsvRecord>>;
  exportUsers(options: ExportOptions = {}): Promise<ExportStream<User> | ExportStream<CsvRecord>> {
    return this.#exportOf<User>('users', options);
  }

  /** Every active department, streamed from one snapshot; see `exportIncidents`. */
  exportDepartments(options?: ExportOptions & { format?: 'ndjson' }): Promise<ExportStream<Department>>;
  exportDepartments(options: ExportOptions & { format: 'csv' }): Promise<ExportStream<CsvRecord>>;
  exportDepartments(options?: ExportOptions): Promise<ExportStream<Department> | ExportStream<CsvRecord>>;
  exportDepartments(
    options: ExportOptions = {},
  ): Promise<ExportStream<Department> | ExportStream<CsvRecord>> {
    return this.#exportOf<Department>('departments', options);
  }

  /** Every active location, streamed from one snapshot; see `exportIncidents`. */
  exportLocations(options?: ExportOptions & { format?: 'ndjson' }): Promise<ExportStream<Location>>;
  exportLocations(options: ExportOptions & { format: 'csv' }): Promise<ExportStream<CsvRecord>>;
  exportLocations(options?: ExportOptions): Promise<ExportStream<Location> | ExportStream<CsvRecord>>;
  exportLocations(options: ExportOptions = {}): Promise<ExportStream<Location> | ExportStream<CsvRecord>> {
    return this.#exportOf<Location>('locations', options);
  }

  /**
   * Every incident, page after page (`limit` per request: the largest page, 200, unless told, so
   * that a walk costs the fewest requests of the hourly allowance). Pages are computed at request
   * time, so for a consistent copy use an export or `sync()`; an incident pushed onto the next page
   * by a new one is not yielded twice.
   */
  async *incidents(
    { limit = INCIDENT_PAGE_SIZE }: { limit?: number } = {},
    options: CallOptions = {},
  ): AsyncGenerator<Incident> {
    let previousPage = new Set<string>();
    for (let page = 1; ; page += 1) {
      const { data } = await this.listIncidents({ page, limit }, options);
      for (const incident of data.data) if (!previousPage.has(incident.id)) yield incident;
      if (page >= data.pagination.pages) return;
      previousPage = new Set(data.data.map((incident) => incident.id));
    }
  }

  /** Every active user (the list is not paged: one request). */
  async *users(options: CallOptions = {}): AsyncGenerator<User> {
    yield* (await this.listUsers(options)).data;
  }

  /** Every active department (one request). */
  async *departments(options: CallOptions = {}): AsyncGenerator<Department> {
    yield* (await this.listDepartments(options)).data;
  }

  /** Every active location (one request). */
  async *locations(options: CallOptions = {}): AsyncGenerator<Location> {
    yield* (await this.listLocations(options)).data;
  }

  /**
   * The pages of the changes feed from `cursor` until `has_more` is false. Store each page's
   * `next_cursor` once its changes are applied; the last one is where to poll from next time.
   */
  async *changes(
    query: { cursor?: string; limit?: number } = {},
    options: CallOptions = {},
  ): AsyncGenerator<ApiResult<ChangesPage>> {
    let { cursor } = query;
    for (;;) {
      const page = await this.listChanges({ cursor, limit: query.limit }, options);
      yield page;
      if (!page.data.has_more) return;
      cursor = page.data.next_cursor;
    }
  }

  /**
   * Brings a copy up to date and returns the cursor to resume from. Without a cursor: the export
   * of every resource, then the feed from the first export's position (a change made during the
   * later exports comes again from the feed, in its latest state). With one: the feed from it.
   * `saveCursor` is called after the exports and after every page of the feed, so a restart loses
   * nothing. A SafetyApiError `CURSOR_EXPIRED` means the cursor is older than the feed keeps:
   * empty the copy and sync without a cursor.
   */
  async sync({ cursor, onRecord, onDelete, saveCursor, ...options }: SyncOptions): Promise<string> {
    let position = cursor ?? null;
    if (position === null) {
      position = await this.#exportAll(onRecord, options);
      await saveCursor(position);
    }
    for await (const page of this.changes({ cursor: position, limit: FEED_PAGE_SIZE }, options)) {
      for (const change of page.data.data) {
        const record = upserted(change);
        if (record === null) await onDelete({ type: change.type, id: change.id });
        else await onRecord(record);
      }
      position = page.data.next_cursor;
      await saveCursor(position);
    }
    return position;
  }

  /** Every resource's export handed to `onRecord`; returns the first snapshot's feed position. */
  async #exportAll(onRecord: SyncOptions['onRecord'], options: CallOptions): Promise<string> {
    const incidents = await this.exportIncidents(options);
    for await (const object of incidents) await onRecord({ type: 'incident', object });
    for await (const object of await this.exportUsers(options)) await onRecord({ type: 'user', object });
    for await (const object of await this.exportDepartments(options))
      await onRecord({ type: 'department', object });
    for await (const object of await this.exportLocations(options))
      await onRecord({ type: 'location', object });
    return incidents.cursor;
  }

  /** A resource's export in the format `options` asks for. */
  #exportOf<Row>(
    resource: 'incidents' | 'users' | 'departments' | 'locations',
    options: ExportOptions,
  ): Promise<ExportStream<Row> | ExportStream<CsvRecord>> {
    const { format = 'ndjson', ...call } = options;
    const init = { parseAs: 'stream' as const, ...this.#sendOptions(call, true) };
    if (format === 'csv')
      return this.#export(this.#api.GET(`/api/v1/public/exports/${resource}.csv`, init), csvRows);
    if (format === 'ndjson')
      return this.#export<Row>(this.#api.GET(`/api/v1/public/exports/${resource}.ndjson`, init), ndjsonRows);
    return Promise.reject(new TypeError(`format must be 'ndjson' or 'csv' (got ${JSON.stringify(format)})`));
  }

  /**
   * An export's rows, read by `rows`: NDJSON typed by the caller (the document describes the body
   * as text), or CSV records.
   */
  async #export<Row>(
    call: Promise<{ data?: ReadableStream<Uint8Array> | null; error?: unknown; response: Response }>,
    rows: (body: ReadableStream<Uint8Array>) => AsyncGenerator<Row>,
  ): Promise<ExportStream<Row>> {
    const { data, error, response } = await call;
    const cursor = response.headers.get('x-changes-cursor');
    if (data === undefined) throw errorOf(response, error);
    // Something in front of the service answered in its place (a captive portal, a proxy's page).
    if (data === null || cursor === null) {
      await data?.cancel();
      throw new Error(`${response.url} is not an export`);
    }
    return new ExportStream(
      data,
      { cursor, rateLimit: rateLimitOf(response), requestId: response.headers.get('x-request-id') },
      rows,
    );
  }

  async #result<T>(
    call: Promise<{ data?: { data: T }; error?: unknown; response: Response }>,
  ): Promise<ApiResult<T>> {
    const { data, error, response } = await call;
    if (data === undefined) throw errorOf(response, error);
    return {
      data: data.data,
      rateLimit: rateLimitOf(response),
      requestId: response.headers.get('x-request-id'),
    };
  }
}

/** A client of the public API for one service and one API key. */
export function createClient(options: ClientOptions): SafetyClient {
  return new SafetyClient(options);
}
