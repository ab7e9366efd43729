import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import {
  API_KEY_SCOPES,
  type ApiKeyScope,
  type ApiKeyState,
  effectiveState,
  generateApiKey,
} from '../auth/api-keys.ts';
import { accountRepository } from '../db/repositories/accounts.ts';
import {
  type ApiKeyRow,
  apiKeyRepository,
  type KeyListQuery,
  type KeyListState,
} from '../db/repositories/api-keys.ts';
import { type AuditEventRow, auditRepository } from '../db/repositories/audit-events.ts';
import type { Database } from '../db/schema.ts';
import { InputError } from '../errors.ts';
import { requireApiAccess } from './account-plan.ts';
import { isStorableText } from '../lib/storable-text.ts';
import { storableText } from './input-text.ts';

/**
 * The API key lifecycle, shared by the CLI and the admin panel: every change is validated here,
 * written with its audit event in one transaction, and seen by the public API at its next request.
 */

/** A key as the CLI and the panel show it: its state includes `expired`, derived from `expires_at`. */
export type ApiKeyView = Omit<ApiKeyRow, 'scope' | 'state' | 'updated_at'> & {
  scope: ApiKeyScope;
  state: ApiKeyState;
};

/** Who made a change: a user id, or `cli`. */
export type Actor = string;

const MAX_NAME_LENGTH = 100;

export function toView(row: ApiKeyRow, now: Date = new Date()): ApiKeyView {
  return {
    id: row.id,
    account_id: row.account_id,
    name: row.name,
    prefix: row.prefix,
    scope: row.scope as ApiKeyScope,
    state: effectiveState(row, now),
    expires_at: row.expires_at,
    last_used_at: row.last_used_at,
    created_by: row.created_by,
    created_at: row.created_at,
    rolled_from: row.rolled_from,
    rolled_to: row.rolled_to,
  };
}

/** How long a rolled key keeps working beside its successor (docs/design.md, "Key roll"). */
export const ROLL_OVERLAPS = {
  now: 0,
  '1h': 3600_000,
  '24h': 24 * 3600_000,
  '7d': 7 * 24 * 3600_000,
} as const;
export type RollOverlap = keyof typeof ROLL_OVERLAPS;

export function parseOverlap(value: string): RollOverlap {
  if (!Object.hasOwn(ROLL_OVERLAPS, value)) {
    throw new InputError(`overlap must be one of ${Object.keys(ROLL_OVERLAPS).join(', ')} (got "${value}")`);
  }
  return value as RollOverlap;
}

/** A successor's name: the old one with its roll date, replacing the date of an earlier roll. */
function successorName(name: string, now: Date): string {
  const suffix = ` (rolled ${now.toISOString().slice(0, 10)})`;
  const base = name.replace(/ \(rolled \d{4}-\d{2}-\d{2}\)$/, '');
  return `${base.slice(0, MAX_NAME_LENGTH - suffix.length)}${suffix}`;
}

export const KEYS_PER_PAGE = 50;
const WEEK_MS = 7 * 24 * 3600 * 1000;
export const KEY_LIST_STATES: readonly KeyListState[] = [
  'active',
  'disabled',
  'expiring',
  'expired',
  'revoked',
];
export const KEY_LIST_SORTS: readonly KeyListQuery['sort'][] = ['created', 'last_used'];

/** What the keys list was asked for, already normalized: anything unknown is the default. */
export interface KeyListRequest {
  search: string;
  state: KeyListState | null;
  sort: KeyListQuery['sort'];
  page: number;
}

/** Normalizes the list's query parameters the way the public API does: never an error. */
export function parseKeyListRequest(query: {
  q: string;
  state: string;
  sort: string;
  page: string;
}): KeyListRequest {
  const state = KEY_LIST_STATES.find((s) => s === query.state) ?? null;
  const sort = KEY_LIST_SORTS.find((s) => s === query.sort) ?? 'created';
  const page = /^[1-9]\d{0,8}$/.test(query.page) ? Number(query.page) : 1;
  return { search: query.q.slice(0, MAX_NAME_LENGTH), state, sort, page };
}

export function parseScope(value: string): ApiKeyScope {
  if (!(API_KEY_SCOPES as readonly string[]).includes(value)) {
    throw new InputError(`scope must be one of ${API_KEY_SCOPES.join(', ')} (got "${value}")`);
  }
  return value as ApiKeyScope;
}

function parseName(value: string): string {
  const name = value.trim();
  if (name === '') throw new InputError('name must not be empty');
  if (name.length > MAX_NAME_LENGTH)
    throw new InputError(`name must be at most ${MAX_NAME_LENGTH} characters`);
  return storableText('name', name);
}

/**
 * An expiry is a date-time with a time zone (`2027-01-31T12:00:00Z`), or a date alone
 * (`2027-01-31`), which keeps the key usable through that whole day in UTC. It must be in the future.
 */
export function parseExpiry(value: string, now: Date): string {
  let expires: number;
  if (/^\d{4}-\d{2}-\d{2}$/.test(value)) {
    expires = Date.parse(`${value}T00:00:00.000Z`) + 24 * 3600 * 1000;
    if (Number.isNaN(expires) || new Date(expires - 1).toISOString().slice(0, 10) !== value)
      expires = Number.NaN;
  } else if (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/.test(value)) {
    expires = Date.parse(value);
  } else {
    expires = Number.NaN;
  }
  if (Number.isNaN(expires)) {
    throw new InputError(
      `expiry must be a date (YYYY-MM-DD) or an ISO 8601 date-time with a time zone (got "${value}")`,
    );
  }
  if (expires <= now.getTime()) throw new InputError(`expiry must be in the future (got "${value}")`);
  return new Date(expires).toISOString();
}

/** The key with this id; an id no key can have (`isStorableText`) is looked up in no store. */
async function findKey(db: Kysely<Database>, keyId: string): Promise<ApiKeyRow | undefined> {
  return isStorableText(keyId) ? apiKeyRepository.findById(db, keyId) : undefined;
}

async function requireKey(db: Kysely<Database>, keyId: string, accountId?: string): Promise<ApiKeyRow> {
  const key = await findKey(db, keyId);
  // A key of another account is reported exactly like a missing one.
  if (key === undefined || (accountId !== undefined && key.account_id !== accountId)) {
    throw new InputError(`no API key with id "${keyId}"`);
  }
  return key;
}

export const apiKeyService = {
  async create(
    db: Kysely<Database>,
    input: { accountId: string; name: string; scope?: string; expiresAt?: string | null; actor: Actor },
    now: Date = new Date(),
  ): Promise<{ key: ApiKeyView; rawKey: string }> {
    const name = parseName(input.name);
    const scope = parseScope(input.scope ?? 'read');
    const expiresAt = input.expiresAt ? parseExpiry(input.expiresAt, now) : null;
    await requireApiAccess(db, input.accountId);

    const { rawKey, keyHash, prefix } = generateApiKey();
    const stamp = now.toISOString();
    const row: ApiKeyRow = {
      id: randomUUID(),
      account_id: input.accountId,
      name,
      prefix,
      scope,
      state: 'active',
      expires_at: expiresAt,
      last_used_at: null,
      created_by: input.actor,
      created_at: stamp,
      updated_at: stamp,
      rolled_from: null,
      rolled_to: null,
    };
    await db.transaction().execute(async (trx) => {
      await apiKeyRepository.insert(trx, { ...row, key_hash: keyHash });
      await auditRepository.insert(trx, {
        account_id: row.account_id,
        subject_type: 'api_key',
        subject_id: row.id,
        actor: input.actor,
        action: 'created',
        detail: `name "${name}", scope ${scope}${expiresAt ? `, expires ${expiresAt}` : ''}`,
        created_at: stamp,
      });
    });
    return { key: toView(row, now), rawKey };
  },

  async list(db: Kysely<Database>, accountId: string, now: Date = new Date()): Promise<ApiKeyView[]> {
    const account = await accountRepository.findById(db, accountId);
    if (account === undefined) throw new InputError(`no account with id "${accountId}"`);
    const rows = await apiKeyRepository.listByAccount(db, accountId);
    return rows.map((row) => toView(row, now));
  },

  /** One page of the account's keys as the panel's list asks for it, and how many pages there are. */
  async listPage(
    db: Kysely<Database>,
    accountId: string,
    request: KeyListRequest,
    now: Date = new Date(),
  ): Promise<{ keys: ApiKeyView[]; total: number; pages: number }> {
    // No name or prefix holds such a search, and PostgreSQL would refuse the query.
    if (!isStorableText(request.search)) return { keys: [], total: 0, pages: 1 };
    const { rows, total } = await apiKeyRepository.findPage(db, accountId, {
      search: request.search,
      state: request.state,
      sort: request.sort,
      offset: (request.page - 1) * KEYS_PER_PAGE,
      limit: KEYS_PER_PAGE,
      now: now.toISOString(),
      weekFromNow: new Date(now.getTime() + WEEK_MS).toISOString(),
    });
    return {
      keys: rows.map((row) => toView(row, now)),
      total,
      pages: Math.max(1, Math.ceil(total / KEYS_PER_PAGE)),
    };
  },

  /**
   * Replaces a key without an outage: a successor with the same scope and expiry (its raw value
   * returned, to be shown once), and the old key set to expire after `overlap` (never later than it
   * already would). Both keys link to each other, and each gets its audit event, in one transaction.
   */
  async roll(
    db: Kysely<Database>,
    keyId: string,
    overlapValue: string,
    actor: Actor,
    accountId?: string,
    now: Date = new Date(),
  ): Promise<{ key: ApiKeyView; rawKey: string; previous: ApiKeyView }> {
    const overlap = parseOverlap(overlapValue);
    for (let attempt = 1; attempt <= MAX_CHANGE_ATTEMPTS; attempt += 1) {
      const old = await requireKey(db, keyId, accountId);
      const state = effectiveState(old, now);
      if (state !== 'active') throw new InputError(`only an active key can be rolled (this one is ${state})`);
      if (old.rolled_to !== null)
        throw new InputError('the key was already rolled: roll its successor instead');
      await requireApiAccess(db, old.account_id);

      const chosen = new Date(now.getTime() + ROLL_OVERLAPS[overlap]).toISOString();
      const oldExpiresAt = old.expires_at !== null && old.expires_at < chosen ? old.expires_at : chosen;
      const { rawKey, keyHash, prefix } = generateApiKey();
      const stamp = now.toISOString();
      const successor: ApiKeyRow = {
        id: randomUUID(),
        account_id: old.account_id,
        name: successorName(old.name, now),
        prefix,
        scope: old.scope,
        state: 'active',
        expires_at: old.expires_at,
        last_used_at: null,
        created_by: actor,
        created_at: stamp,
        updated_at: stamp,
        rolled_from: old.id,
        rolled_to: null,
      };
      // The write to the old key comes first: on SQLite it takes the write lock on the latest snapshot.
      const written = await db.transaction().execute(async (trx) => {
        const patch = { expires_at: oldExpiresAt, rolled_to: successor.id, updated_at: stamp };
        if (!(await apiKeyRepository.markRolled(trx, old, patch))) return false;
        await apiKeyRepository.insert(trx, { ...successor, key_hash: keyHash });
        await auditRepository.insert(trx, {
          account_id: old.account_id,
          subject_type: 'api_key',
          subject_id: old.id,
          actor,
          action: 'rolled',
          detail: `replaced by "${successor.name}" (${prefix}…), expires ${oldExpiresAt}`,
          created_at: stamp,
        });
        await auditRepository.insert(trx, {
          account_id: old.account_id,
          subject_type: 'api_key',
          subject_id: successor.id,
          actor,
          action: 'created_by_roll',
          detail: `replaces "${old.name}" (${old.prefix}…), scope ${old.scope}${old.expires_at ? `, expires ${old.expires_at}` : ''}`,
          created_at: stamp,
        });
        return true;
      });
      if (written) {
        return {
          key: toView(successor, now),
          rawKey,
          previous: toView({ ...old, expires_at: oldExpiresAt, rolled_to: successor.id }, now),
        };
      }
    }
    throw new InputError(`the key "${keyId}" is being changed by someone else right now: try again`);
  },

  /** The names of those of `ids` that are keys of the account (for links and the audit trail). */
  async namesByIds(db: Kysely<Database>, accountId: string, ids: string[]): Promise<Map<string, string>> {
    return apiKeyRepository.namesByIds(db, accountId, [...new Set(ids)]);
  },

  /** The key if it belongs to the account; another account's key is as absent as a missing one. */
  async findOwn(db: Kysely<Database>, keyId: string, accountId: string): Promise<ApiKeyView | null> {
    const row = await findKey(db, keyId);
    return row === undefined || row.account_id !== accountId ? null : toView(row);
  },

  /** The account's latest `limit` audit events about keys, newest first. */
  async listEvents(db: Kysely<Database>, accountId: string, limit: number): Promise<AuditEventRow[]> {
    return auditRepository.list(db, accountId, limit, { type: 'api_key' });
  },

  async rename(
    db: Kysely<Database>,
    keyId: string,
    newName: string,
    actor: Actor,
    accountId?: string,
  ): Promise<ApiKeyView> {
    const name = parseName(newName);
    return change(db, keyId, actor, accountId, (key) => ({
      patch: { name },
      action: 'renamed',
      detail: `from "${key.name}" to "${name}"`,
    }));
  },

  async setScope(
    db: Kysely<Database>,
    keyId: string,
    newScope: string,
    actor: Actor,
    accountId?: string,
  ): Promise<ApiKeyView> {
    const scope = parseScope(newScope);
    return change(db, keyId, actor, accountId, (key) => ({
      patch: { scope },
      action: 'scope_changed',
      detail: `from ${key.scope} to ${scope}`,
    }));
  },

  async disable(db: Kysely<Database>, keyId: string, actor: Actor, accountId?: string): Promise<ApiKeyView> {
    return change(db, keyId, actor, accountId, (key) => {
      if (key.state === 'revoked') throw new InputError('a revoked key cannot be disabled');
      if (key.state === 'disabled') throw new InputError('the key is already disabled');
      return { patch: { state: 'disabled' }, action: 'disabled', detail: null };
    });
  },

  async enable(db: Kysely<Database>, keyId: string, actor: Actor, accountId?: string): Promise<ApiKeyView> {
    return change(db, keyId, actor, accountId, (key) => {
      if (key.state === 'revoked') throw new InputError('a revoked key cannot be enabled: create a new key');
      if (key.state === 'active') throw new InputError('the key is already enabled');
      return { patch: { state: 'active' }, action: 'enabled', detail: null };
    });
  },

  async revoke(db: Kysely<Database>, keyId: string, actor: Actor, accountId?: string): Promise<ApiKeyView> {
    return change(db, keyId, actor, accountId, (key) => {
      if (key.state === 'revoked') throw new InputError('the key is already revoked');
      return { patch: { state: 'revoked' }, action: 'revoked', detail: null };
    });
  },
};

// Each lost race means another change to the same key committed in between; a handful of them in
// a row is contention no person or script causes, so it ends as an error rather than a loop.
const MAX_CHANGE_ATTEMPTS = 8;

/**
 * Applies one validated change to a key and records its audit event, atomically. The decision is
 * made on the key as read, and the write only lands while the key is still as read
 * (compare-and-set): when another change got in between, the key is read again and the change
 * decided again, so a revoked key is never enabled and the audit trail is the key's history.
 */
async function change(
  db: Kysely<Database>,
  keyId: string,
  actor: Actor,
  accountId: string | undefined,
  decide: (key: ApiKeyRow) => {
    patch: Partial<Pick<ApiKeyRow, 'name' | 'scope' | 'state'>>;
    action: string;
    detail: string | null;
  },
): Promise<ApiKeyView> {
  for (let attempt = 1; attempt <= MAX_CHANGE_ATTEMPTS; attempt += 1) {
    const key = await requireKey(db, keyId, accountId);
    const { patch, action, detail } = decide(key);
    const now = new Date();
    const stamp = now.toISOString();
    // The write comes first in the transaction: on SQLite that takes the write lock on the latest
    // snapshot (a read first could find its snapshot stale at the write and fail).
    const written = await db.transaction().execute(async (trx) => {
      if (!(await apiKeyRepository.updateIfUnchanged(trx, key, { ...patch, updated_at: stamp })))
        return false;
      await auditRepository.insert(trx, {
        account_id: key.account_id,
        subject_type: 'api_key',
        subject_id: key.id,
        actor,
        action,
        detail,
        created_at: stamp,
      });
      return true;
    });
    if (written) return toView({ ...key, ...patch, updated_at: stamp }, now);
  }
  throw new InputError(`the key "${keyId}" is being changed by someone else right now: try again`);
}
