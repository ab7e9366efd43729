import { USER_ROLES } from '../auth/roles.ts';
import type { AccountInput } from '../db/repositories/accounts.ts';
import type { AccountIncidentKey, IncidentInput } from '../db/repositories/incidents.ts';
import type { NamedResourceInput } from '../db/repositories/named-resources.ts';
import type { UserInput } from '../db/repositories/users.ts';
import { InputError } from '../errors.ts';
import { storageProblem } from '../lib/storable-text.ts';

/**
 * The record types an import takes and what each one's records must be: each record is checked
 * field by field and turned into the row its repository stores; the first problem is reported
 * with the record's place and field name. How rows are written is records.ts: this module
 * imports no repository or store, so the import's reader thread (worker.ts) loads only it.
 */

export const INCIDENT_NUMBER = /^INC-(\d{4})-(\d{1,9})$/;
const MAX_RATING = 100;

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/;
const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** Whether the proleptic Gregorian calendar has this day (months from 1). */
function isCalendarDay(year: number, month: number, day: number): boolean {
  if (month < 1 || month > 12 || day < 1) return false;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return day <= (month === 2 && leap ? 29 : (DAYS_IN_MONTH[month - 1] as number));
}

/** The number written by the ASCII digits of `text` in [from, to), or -1 if any is not a digit. */
function digitsAt(text: string, from: number, to: number): number {
  let value = 0;
  for (let i = from; i < to; i += 1) {
    const digit = text.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return -1;
    value = value * 10 + digit;
  }
  return value;
}

/**
 * Whether `text` is already a date-time as `dateTime` stores it (`2026-03-01T08:30:00.000Z`,
 * as every export writes it) and names a real instant: then parsing and formatting it again would
 * give back the same string, so that work is skipped. Anything else takes the general path.
 */
function isCanonicalUtc(text: string): boolean {
  if (
    text.length !== 24 ||
    text[4] !== '-' ||
    text[7] !== '-' ||
    text[10] !== 'T' ||
    text[13] !== ':' ||
    text[16] !== ':' ||
    text[19] !== '.' ||
    text[23] !== 'Z'
  )
    return false;
  const year = digitsAt(text, 0, 4);
  const hour = digitsAt(text, 11, 13);
  const minute = digitsAt(text, 14, 16);
  const second = digitsAt(text, 17, 19);
  return (
    year >= 0 &&
    isCalendarDay(year, digitsAt(text, 5, 7), digitsAt(text, 8, 10)) &&
    hour >= 0 &&
    hour <= 23 &&
    minute >= 0 &&
    minute <= 59 &&
    second >= 0 &&
    second <= 59 &&
    digitsAt(text, 20, 23) >= 0
  );
}

/** Reads one record's fields, naming the record and field in every error. */
export class Fields {
  private readonly where: string;
  private readonly record: Record<string, unknown>;

  constructor(where: string, record: Record<string, unknown>) {
    this.where = where;
    this.record = record;
  }

  fail(field: string, problem: string): never {
    throw new InputError(`${this.where}: field "${field}" ${problem}`);
  }

  private show(value: unknown): string {
    const text = JSON.stringify(value) ?? String(value);
    return text.length > 60 ? `${text.slice(0, 57)}...` : text;
  }

  uuid(field: string): string {
    const value = this.record[field];
    if (value === undefined || value === null) this.fail(field, 'is required');
    if (typeof value !== 'string' || !UUID.test(value))
      this.fail(field, `must be a UUID (got ${this.show(value)})`);
    return value.toLowerCase();
  }

  text(field: string, maxLength: number): string {
    const value = this.record[field];
    if (value === undefined || value === null) this.fail(field, 'is required');
    if (typeof value !== 'string') this.fail(field, `must be a string (got ${this.show(value)})`);
    if (value.trim() === '') this.fail(field, 'must not be empty');
    return this.storable(field, value, maxLength);
  }

  optionalText(field: string, maxLength: number): string | null {
    const value = this.record[field];
    if (value === undefined || value === null) return null;
    if (typeof value !== 'string') this.fail(field, `must be a string or null (got ${this.show(value)})`);
    return this.storable(field, value, maxLength);
  }

  /** Text both stores keep as it is (`storageProblem`), within `maxLength`. */
  private storable(field: string, value: string, maxLength: number): string {
    if (value.length > maxLength) this.fail(field, `must be at most ${maxLength} characters`);
    const problem = storageProblem(value);
    if (problem !== null) this.fail(field, problem);
    return value;
  }

  flag(field: string, fallback: boolean): number {
    const value = this.record[field];
    if (value === undefined || value === null) return fallback ? 1 : 0;
    if (typeof value !== 'boolean') this.fail(field, `must be true or false (got ${this.show(value)})`);
    return value ? 1 : 0;
  }

  integer(field: string, min: number, max: number, fallback?: number): number {
    const value = this.record[field];
    if ((value === undefined || value === null) && fallback !== undefined) return fallback;
    if (value === undefined || value === null) this.fail(field, 'is required');
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      this.fail(field, `must be a whole number from ${min} to ${max} (got ${this.show(value)})`);
    }
    return value;
  }

  optionalInteger(field: string, min: number, max: number): number | null {
    const value = this.record[field];
    if (value === undefined || value === null) return null;
    return this.integer(field, min, max);
  }

  oneOf<T extends string>(field: string, allowed: readonly T[]): T {
    const value = this.text(field, 100);
    if (!(allowed as readonly string[]).includes(value)) {
      this.fail(field, `must be one of ${allowed.join(', ')} (got ${this.show(value)})`);
    }
    return value as T;
  }

  email(field: string): string {
    const value = this.text(field, 254);
    if (!EMAIL.test(value)) this.fail(field, `must be an email address (got ${this.show(value)})`);
    return value;
  }

  /** A date-time with a time zone, stored as UTC with milliseconds; `fallback` when absent. */
  dateTime(field: string, fallback: string | null): string {
    const value = this.record[field];
    if ((value === undefined || value === null) && fallback !== null) return fallback;
    if (value === undefined || value === null) this.fail(field, 'is required');
    if (typeof value === 'string' && isCanonicalUtc(value)) return value;
    const time = typeof value === 'string' && DATE_TIME.test(value) ? Date.parse(value) : Number.NaN;
    if (Number.isNaN(time)) {
      this.fail(
        field,
        `must be an ISO 8601 date-time with a time zone, e.g. 2026-03-01T08:30:00Z (got ${this.show(value)})`,
      );
    }
    return new Date(time).toISOString();
  }

  optionalDate(field: string): string | null {
    const value = this.record[field];
    if (value === undefined || value === null) return null;
    const match = typeof value === 'string' ? DATE.exec(value) : null;
    const valid =
      match !== null &&
      match[1] !== '0000' &&
      isCalendarDay(Number(match[1]), Number(match[2]), Number(match[3]));
    if (!valid) this.fail(field, `must be a date as YYYY-MM-DD (got ${this.show(value)})`);
    return value as string;
  }

  rejectUnknown(type: RecordType, extra: readonly string[]): void {
    const allowed = ALLOWED_FIELDS[type];
    for (const field of Object.keys(this.record)) {
      if (!allowed.has(field) && !extra.includes(field)) this.fail(field, `is not a field of ${type}`);
    }
  }
}

/** What a record of one type must be. */
export interface RecordForm<Row extends { id: string }> {
  /** The records' `.json` section, and how the CLI counts them. */
  plural: string;
  /** The fields a record may carry; any other is refused. */
  fields: readonly string[];
  /** The row a record stores; throws the InputError of its first bad field. */
  validate(f: Fields, now: string): Row;
}

/** What a `"deleted": true` record names. */
export interface RecordRef {
  id: string;
  account_id: string;
}

/**
 * The fields of an incident record that say where it is paged, as its validation reads them: so
 * that an import can rank a file's incidents before it writes them (`incidentKeys`, source.ts).
 */
export function incidentKey(f: Fields, now: string): AccountIncidentKey {
  return { id: f.uuid('id'), account_id: f.uuid('account_id'), created_at: f.dateTime('created_at', now) };
}

function namedResource(plural: 'departments' | 'locations'): RecordForm<NamedResourceInput> {
  return {
    plural,
    fields: ['id', 'account_id', 'name', 'active', 'created_at'],
    validate: (f, now) => ({
      id: f.uuid('id'),
      account_id: f.uuid('account_id'),
      name: f.text('name', 200),
      active: f.flag('active', true),
      created_at: f.dateTime('created_at', now),
    }),
  };
}

/**
 * Every record type, in dependency order: a `.json` file's sections are read, and each batch is
 * written (records.ts), in this order, so an account is in the store before anything that
 * belongs to it.
 */
export const RECORD_FORMS = {
  account: {
    plural: 'accounts',
    fields: ['id', 'name', 'api_access', 'rate_limit_per_hour'],
    validate: (f) => ({
      id: f.uuid('id'),
      name: f.text('name', 200),
      api_access: f.flag('api_access', true),
      rate_limit_per_hour: f.integer('rate_limit_per_hour', 1, 1_000_000_000, 1000),
    }),
  } satisfies RecordForm<AccountInput>,
  department: namedResource('departments'),
  location: namedResource('locations'),
  user: {
    plural: 'users',
    fields: [
      'id',
      'account_id',
      'name',
      'email',
      'role',
      'department',
      'job_title',
      'active',
      'vendor_support',
      'created_at',
    ],
    validate: (f, now) => ({
      id: f.uuid('id'),
      account_id: f.uuid('account_id'),
      name: f.text('name', 200),
      email: f.email('email'),
      role: f.oneOf('role', USER_ROLES),
      department: f.optionalText('department', 200),
      job_title: f.optionalText('job_title', 200),
      active: f.flag('active', true),
      vendor_support: f.flag('vendor_support', false),
      created_at: f.dateTime('created_at', now),
    }),
  } satisfies RecordForm<UserInput>,
  incident: {
    plural: 'incidents',
    fields: [
      'id',
      'account_id',
      'incident_number',
      'description',
      'status',
      'severity_likelihood',
      'severity_impact',
      // Computed by the service; accepted so that API output can be imported again, never stored.
      'severity_score',
      'location',
      'incident_date',
      'created_at',
      'updated_at',
    ],
    validate: (f, now) => {
      const { id, account_id: accountId, created_at: createdAt } = incidentKey(f, now);
      const incidentNumber = f.text('incident_number', 30);
      if (!INCIDENT_NUMBER.test(incidentNumber)) {
        f.fail(
          'incident_number',
          `must look like INC-<year>-<sequence>, e.g. INC-2026-0042 (got "${incidentNumber}")`,
        );
      }
      return {
        id,
        account_id: accountId,
        incident_number: incidentNumber,
        description: f.optionalText('description', 100_000),
        status: f.text('status', 50),
        severity_likelihood: f.optionalInteger('severity_likelihood', 0, MAX_RATING),
        severity_impact: f.optionalInteger('severity_impact', 0, MAX_RATING),
        location: f.optionalText('location', 200),
        incident_date: f.optionalDate('incident_date'),
        created_at: createdAt,
        updated_at: f.dateTime('updated_at', createdAt),
      };
    },
  } satisfies RecordForm<IncidentInput>,
};

export type RecordType = keyof typeof RECORD_FORMS;
export const RECORD_TYPES = Object.keys(RECORD_FORMS) as RecordType[];

/**
 * Lines of a `safety-api accounts export` file that are not records an import writes: what the
 * tenant is owed a copy of but an import cannot restore (keys have no hash in the export, webhook
 * endpoints and OAuth clients no secret, grants no tokens, and the audit trail is history). An
 * NDJSON import skips them, counted, and writes the records beside them.
 */
export const EXPORT_ONLY_TYPES = [
  'api_key',
  'webhook_endpoint',
  'oauth_client',
  'oauth_grant',
  'audit_event',
] as const;
export type ExportOnlyType = (typeof EXPORT_ONLY_TYPES)[number];

/** The row a record of type `T` stores. */
export type RowOf<T extends RecordType> = ReturnType<(typeof RECORD_FORMS)[T]['validate']>;

/** The record types a `"deleted": true` record may name. */
export type DeletableType = Exclude<RecordType, 'account'>;

/** A validated record: one to write, or one to delete. */
export type ValidRecord =
  | { [T in RecordType]: { type: T; deleted: false; row: RowOf<T> } }[RecordType]
  | { type: DeletableType; deleted: true; row: RecordRef };

/** One value per record type, made by `make`. */
export function perRecordType<V>(make: (type: RecordType) => V): Record<RecordType, V> {
  const values = {} as Record<RecordType, V>;
  for (const type of RECORD_TYPES) values[type] = make(type);
  return values;
}

const ALLOWED_FIELDS: Record<RecordType, ReadonlySet<string>> = perRecordType(
  (type) => new Set(RECORD_FORMS[type].fields),
);

/** Fields a record of any type may carry beside its own: its `type` and `deleted`. */
const ENVELOPE_FIELDS = ['type', 'deleted'] as const;

/**
 * Validates one record of `type`. `where` names it in errors (`line 12`, `incidents[3]`). A record
 * may carry `type` in any format (an NDJSON line must), but only its own: in a `.json` section, a
 * `type` naming another section's records is refused rather than taken for one or the other.
 */
export function validateRecord(type: RecordType, value: unknown, where: string, now: string): ValidRecord {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InputError(`${where}: must be a JSON object`);
  }
  const record = value as Record<string, unknown>;
  const f = new Fields(where, record);
  f.rejectUnknown(type, ENVELOPE_FIELDS);
  if (record.type !== undefined && record.type !== type) {
    f.fail(
      'type',
      `must be "${type}" for a record of "${RECORD_FORMS[type].plural}" (got ${JSON.stringify(record.type)})`,
    );
  }
  if (f.flag('deleted', false) === 0) {
    return { type, deleted: false, row: RECORD_FORMS[type].validate(f, now) } as ValidRecord;
  }
  // A deletion needs only what names the record; the other fields of its type that it carries (a
  // record copied from an export, say) are ignored. A field its type does not have was refused
  // above, as in any record: a typo does not pass.
  if (type === 'account') return f.fail('deleted', 'cannot be true: accounts are not deleted by an import');
  return { type, deleted: true, row: { id: f.uuid('id'), account_id: f.uuid('account_id') } };
}
