import { caching, type EtagCache, MemoryEtagCache } from './etag-cache.ts';
import { type CsvRecord, csvRows, type ExportFormat, ExportStream, ndjsonRows } from './export-stream.ts';
import { type CallOptions, type ConnectionOptions, errorOf, rateLimitOf, Transport } from './transport.ts';
import type {
  ApiResult,
  Change,
  ChangesPage,
  Department,
  Incident,
  IncidentPagination,
  Liveness,
  Location,
  Page,
  Readiness,
  RecordType,
  TypedRecord,
  User,
} from './types.ts';

/**
 * The credentials of a client: an API key (`svc_…`) for the public API, an OAuth 2 access token of
 * the same account for the wider API's `…Paged` calls, or both. The probes need neither.
 */
export type Credentials =
  { apiKey: string; accessToken?: string } | { apiKey?: undefined; accessToken: string };

export type ClientOptions = ConnectionOptions &
  Credentials & {
    /**
     * Keep the answers of GETs with their ETags and ask with `If-None-Match`: a 304 (free, not
     * counted against the allowance) is answered from the cache. `true`: a `MemoryEtagCache` of 8
     * MiB; or an `EtagCache` of your own. Off by default.
     */
    etagCache?: boolean | EtagCache;
  };

export type { CallOptions };

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

/** A page of the wider API: from offset `start` (default 0), `limit` records (default 20, at most 100). */
export interface PageQuery {
  start?: number;
  limit?: number;
}

/** The largest page of the feed: the fewest requests for `sync()`. */
const FEED_PAGE_SIZE = 1000;
/** The largest page of incidents the API serves: the fewest requests for `incidents()`. */
const INCIDENT_PAGE_SIZE = 200;
/** The largest page of the wider API (`_limit`): the fewest requests for the `…Paged()` iterators. */
const WIDER_PAGE_SIZE = 100;

const isReadiness = (body: unknown): body is Readiness =>
  typeof body === 'object' && body !== null && 'status' in body && 'database' in body;

/** The wider API's query parameters for a `PageQuery`. */
const pageQuery = ({ start, limit }: PageQuery) => ({ _start: start, _limit: limit });

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

/**
 * A client of the service for one account: the public API with an API key, the wider API with an
 * OAuth 2 access token, and the probes.
 */
export class SafetyClient {
  readonly #transport: Transport;
  readonly #apiKey: string | undefined;
  readonly #accessToken: string | undefined;

  constructor(options: ClientOptions) {
    const { apiKey, accessToken, etagCache = false } = options;
    if (apiKey === undefined && accessToken === undefined)
      throw new TypeError(
        'apiKey (svc_…, for the public API) or accessToken (OAuth 2, for the wider API) is required',
      );
    this.#apiKey = apiKey;
    this.#accessToken = accessToken;
    this.#transport = new Transport(options, (send) =>
      etagCache === false ? send : caching(send, etagCache === true ? new MemoryEtagCache() : etagCache),
    );
  }

  /** The headers of a public API call: its API key. */
  #withKey() {
    if (this.#apiKey === undefined)
      throw new TypeError('this call is to the public API: create the client with an apiKey (svc_…)');
    return { authorization: `Bearer ${this.#apiKey}` };
  }

  /** The headers of a wider API call: its access token. */
  #withToken() {
    if (this.#accessToken === undefined)
      throw new TypeError('this call is to the wider API: create the client with an accessToken (OAuth 2)');
    return { authorization: `Bearer ${this.#accessToken}` };
  }

  /** A public API call's options for openapi-fetch. */
  #public(options: CallOptions) {
    return { headers: this.#withKey(), ...this.#transport.init(options) };
  }

  /** One page of incidents, newest first. `limit` is at most 200 (larger is served as 200). */
  async listIncidents(
    query: { page?: number; limit?: number } = {},
    options: CallOptions = {},
  ): Promise<ApiResult<{ data: Incident[]; pagination: IncidentPagination }>> {
    return this.#data(
      this.#transport.api.GET('/api/v1/public/incidents', { params: { query }, ...this.#public(options) }),
    );
  }

  /** One incident; a SafetyApiError with status 404 when the account has none with that id. */
  async getIncident(id: string, options: CallOptions = {}): Promise<ApiResult<Incident>> {
    return this.#data(
      this.#transport.api.GET('/api/v1/public/incidents/{id}', {
        params: { path: { id } },
        ...this.#public(options),
      }),
    );
  }

  /** Every active user, by name. */
  async listUsers(options: CallOptions = {}): Promise<ApiResult<User[]>> {
    return this.#data(this.#transport.api.GET('/api/v1/public/users', this.#public(options)));
  }

  /** Every active department, by name. */
  async listDepartments(options: CallOptions = {}): Promise<ApiResult<Department[]>> {
    return this.#data(this.#transport.api.GET('/api/v1/public/departments', this.#public(options)));
  }

  /** Every active location, by name. */
  async listLocations(options: CallOptions = {}): Promise<ApiResult<Location[]>> {
    return this.#data(this.#transport.api.GET('/api/v1/public/locations', this.#public(options)));
  }

  /**
   * One page of the changes feed after `cursor` (none: from the beginning; `latest`: no changes,
   * the current position). Continue from `next_cursor` while `has_more`.
   */
  async listChanges(
    query: { cursor?: string; limit?: number } = {},
    options: CallOptions = {},
  ): Promise<ApiResult<ChangesPage>> {
    return this.#data(
      this.#transport.api.GET('/api/v1/public/changes', { params: { query }, ...this.#public(options) }),
    );
  }

  /**
   * The wider API (an access token with `incidents:read`): one page of incidents, newest first,
   * from offset `start`.
   */
  async listIncidentsPaged(
    query: PageQuery = {},
    options: CallOptions = {},
  ): Promise<ApiResult<Page<Incident>>> {
    return this.#answer(this.#transport.api.GET('/api/v1/incidents', this.#wider(query, options)));
  }

  /** The wider API (an access token with `users:read`): one page of active users, by name. */
  async listUsersPaged(query: PageQuery = {}, options: CallOptions = {}): Promise<ApiResult<Page<User>>> {
    return this.#answer(this.#transport.api.GET('/api/v1/users', this.#wider(query, options)));
  }

  /** The wider API (an access token with `departments:read`): one page of active departments. */
  async listDepartmentsPaged(
    query: PageQuery = {},
    options: CallOptions = {},
  ): Promise<ApiResult<Page<Department>>> {
    return this.#answer(this.#transport.api.GET('/api/v1/departments', this.#wider(query, options)));
  }

  /** The wider API (an access token with `locations:read`): one page of active locations. */
  async listLocationsPaged(
    query: PageQuery = {},
    options: CallOptions = {},
  ): Promise<ApiResult<Page<Location>>> {
    return this.#answer(this.#transport.api.GET('/api/v1/locations', this.#wider(query, options)));
  }

  /** A wider API call's options for openapi-fetch. */
  #wider(query: PageQuery, options: CallOptions) {
    return {
      params: { query: pageQuery(query) },
      headers: this.#withToken(),
      ...this.#transport.init(options),
    };
  }

  /** Whether the process answers (`/healthz`); sends no credential, counts against no allowance. */
  async checkLiveness(options: CallOptions = {}): Promise<ApiResult<Liveness>> {
    const { data, error, response } = await this.#transport.api.GET(
      '/healthz',
      this.#transport.init(options),
    );
    if (data === undefined) throw errorOf(response, error);
    return { data, rateLimit: null, requestId: response.headers.get('x-request-id') };
  }

  /**
   * Whether the instance can serve requests (`/readyz`): the report, `status: 'ready'` or
   * `'unavailable'` (its database does not answer), either way. Asked once, never retried: the
   * report is of this moment. A 503 without a report (the instance is shutting down) throws a
   * `ServiceUnavailableError`.
   */
  async checkReadiness(options: CallOptions = {}): Promise<ApiResult<Readiness>> {
    const { data, error, response } = await this.#transport.api.GET(
      '/readyz',
      this.#transport.init(options, { retry: false }),
    );
    const report = data ?? (response.status === 503 && isReadiness(error) ? error : undefined);
    if (report === undefined) throw errorOf(response, error);
    return { data: report, rateLimit: null, requestId: response.headers.get('x-request-id') };
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

  /** Every incident through the wider API's pages (`limit` per request: 100, the largest, unless told). */
  incidentsPaged({ limit = WIDER_PAGE_SIZE }: { limit?: number } = {}, options: CallOptions = {}) {
    return this.#offsetPages((start) => this.listIncidentsPaged({ start, limit }, options));
  }

  /** Every active user through the wider API's pages. */
  usersPaged({ limit = WIDER_PAGE_SIZE }: { limit?: number } = {}, options: CallOptions = {}) {
    return this.#offsetPages((start) => this.listUsersPaged({ start, limit }, options));
  }

  /** Every active department through the wider API's pages. */
  departmentsPaged({ limit = WIDER_PAGE_SIZE }: { limit?: number } = {}, options: CallOptions = {}) {
    return this.#offsetPages((start) => this.listDepartmentsPaged({ start, limit }, options));
  }

  /** Every active location through the wider API's pages. */
  locationsPaged({ limit = WIDER_PAGE_SIZE }: { limit?: number } = {}, options: CallOptions = {}) {
    return this.#offsetPages((start) => this.listLocationsPaged({ start, limit }, options));
  }

  /**
   * Every record of a wider API list: the next page starts at `start` + `perPage` while
   * `currentPage` is below `totalPages`. A record pushed onto the next page by a new one is not
   * yielded twice.
   */
  async *#offsetPages<T extends { id: string }>(
    list: (start: number) => Promise<ApiResult<Page<T>>>,
  ): AsyncGenerator<T> {
    let previousPage = new Set<string>();
    for (let start = 0; ;) {
      const { response: records, pagination } = (await list(start)).data;
      for (const record of records) if (!previousPage.has(record.id)) yield record;
      if (records.length === 0 || pagination.currentPage >= pagination.totalPages) return;
      previousPage = new Set(records.map((record) => record.id));
      start = pagination.start + pagination.perPage;
    }
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
  async #exportOf<Row>(
    resource: 'incidents' | 'users' | 'departments' | 'locations',
    options: ExportOptions,
  ): Promise<ExportStream<Row> | ExportStream<CsvRecord>> {
    const { format = 'ndjson', ...call } = options;
    if (format !== 'csv' && format !== 'ndjson')
      throw new TypeError(`format must be 'ndjson' or 'csv' (got ${JSON.stringify(format)})`);
    const init = {
      parseAs: 'stream' as const,
      headers: this.#withKey(),
      ...this.#transport.init(call, { stream: true }),
    };
    if (format === 'csv')
      return this.#export(this.#transport.api.GET(`/api/v1/public/exports/${resource}.csv`, init), csvRows);
    return this.#export<Row>(
      this.#transport.api.GET(`/api/v1/public/exports/${resource}.ndjson`, init),
      ndjsonRows,
    );
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

  /** A public API answer: the envelope's `data`. */
  async #data<T>(
    call: Promise<{ data?: { data: T }; error?: unknown; response: Response }>,
  ): Promise<ApiResult<T>> {
    const { data, rateLimit, requestId } = await this.#answer(call);
    return { data: data.data, rateLimit, requestId };
  }

  /** An API answer as it is: the wider API's page, or the public API's envelope. */
  async #answer<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<ApiResult<T>> {
    const { data, error, response } = await call;
    if (data === undefined) throw errorOf(response, error);
    return { data, rateLimit: rateLimitOf(response), requestId: response.headers.get('x-request-id') };
  }
}

/**
 * A client of the service for one account: the public API with `apiKey`, the wider API with
 * `accessToken`, and the probes.
 */
export function createClient(options: ClientOptions): SafetyClient {
  return new SafetyClient(options);
}
