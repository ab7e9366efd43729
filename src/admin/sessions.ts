import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import type { CookieSerializeOptions } from '@fastify/cookie';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { adminSessionRepository } from '../db/repositories/admin-sessions.ts';
import { ADMIN_PATH } from '../paths.ts';
import { type AdminPrincipal, principalOfSession } from './access.ts';
import { newCsrfToken } from './csrf.ts';
import type { EndpointAlert } from '../services/mail-service.ts';

/**
 * Admin panel sessions. The browser holds a random session id in an HttpOnly cookie; the database
 * holds only its SHA-256 hash, so a copy of the database cannot be replayed as a cookie.
 */

export const SESSION_COOKIE = 'sia_admin_session';
/** Carries the sign-in form's CSRF token before any session exists. */
export const SIGN_IN_COOKIE = 'sia_admin_sign_in';

const ABSOLUTE_LIFETIME_MS = 12 * 3600 * 1000;
const IDLE_TIMEOUT_MS = 2 * 3600 * 1000;
// Recording activity on every request would make every page view a write.
const TOUCH_INTERVAL_MS = 60 * 1000;
const RAW_ID = /^[A-Za-z0-9_-]{43}$/;

export interface AdminSession {
  rawId: string;
  idHash: string;
  csrfToken: string;
  principal: AdminPrincipal;
  sealedFlash: string | null;
  /** The account's endpoints in trouble, read by the signed-in area on each request: the banner. */
  alerts?: EndpointAlert[];
}

/** A value the next page shows in a read-only field with a copy button. */
export interface FlashValue {
  /** The field's HTML id, unique on the page. */
  id: string;
  label: string;
  value: string;
}

/**
 * A one-time message for the next page. `values` are what was just created (a raw API key, an
 * OAuth client's id and secret, a webhook signing secret); they are shown exactly once, since
 * reading the flash deletes it. `secret` marks values that are credentials the panel never shows
 * again: the page then warns so, naming them, why (`kept`: how they are stored, by default only as
 * a hash) and what to do if they are lost. `note` is a sentence shown under the values.
 */
export interface Flash {
  kind: 'success' | 'error';
  message: string;
  values?: FlashValue[];
  secret?: { noun: string; ifLost: string; kept?: string };
  note?: string;
}

export function adminCookieOptions(request: FastifyRequest): CookieSerializeOptions {
  return {
    httpOnly: true,
    sameSite: 'lax',
    path: ADMIN_PATH,
    secure: request.server.config.baseUrl.startsWith('https://'),
  };
}

function hashSessionId(rawId: string): string {
  return createHash('sha256').update(rawId).digest('hex');
}

/**
 * Starts a fresh session for a user who just proved their password. Any session the browser
 * already had is deleted, so a session id planted before sign-in is worthless after it.
 */
export async function startSession(
  request: FastifyRequest,
  reply: FastifyReply,
  user: { id: string; account_id: string },
): Promise<void> {
  const db = request.server.db;
  const previous = request.cookies[SESSION_COOKIE];
  if (previous !== undefined && RAW_ID.test(previous)) {
    await adminSessionRepository.deleteByHash(db, hashSessionId(previous));
  }
  const now = Date.now();
  await adminSessionRepository.deleteExpired(
    db,
    new Date(now).toISOString(),
    new Date(now - IDLE_TIMEOUT_MS).toISOString(),
  );

  const rawId = randomBytes(32).toString('base64url');
  const stamp = new Date(now).toISOString();
  await adminSessionRepository.insert(db, {
    id_hash: hashSessionId(rawId),
    user_id: user.id,
    account_id: user.account_id,
    csrf_token: newCsrfToken(),
    flash: null,
    created_at: stamp,
    last_seen_at: stamp,
    expires_at: new Date(now + ABSOLUTE_LIFETIME_MS).toISOString(),
  });
  const options = adminCookieOptions(request);
  reply.setCookie(SESSION_COOKIE, rawId, { ...options, maxAge: ABSOLUTE_LIFETIME_MS / 1000 });
  reply.clearCookie(SIGN_IN_COOKIE, options);
}

/** The request's live session, or null when there is none or it has ended. */
export async function loadSession(request: FastifyRequest): Promise<AdminSession | null> {
  const rawId = request.cookies[SESSION_COOKIE];
  if (rawId === undefined || !RAW_ID.test(rawId)) return null;
  const db = request.server.db;
  const idHash = hashSessionId(rawId);
  const row = await adminSessionRepository.findWithUser(db, idHash);
  if (row === undefined) return null;

  const now = Date.now();
  const ended =
    Date.parse(row.expires_at) <= now ||
    Date.parse(row.last_seen_at) + IDLE_TIMEOUT_MS <= now ||
    // A user moved to another account must sign in again rather than carry the old account along.
    row.account_id !== row.user_account_id;
  if (ended) {
    await adminSessionRepository.deleteByHash(db, idHash);
    return null;
  }
  if (now - Date.parse(row.last_seen_at) >= TOUCH_INTERVAL_MS) {
    await adminSessionRepository.touch(db, idHash, new Date(now).toISOString());
  }
  return {
    rawId,
    idHash,
    csrfToken: row.csrf_token,
    principal: principalOfSession(row),
    sealedFlash: row.flash,
  };
}

export async function endSession(
  request: FastifyRequest,
  reply: FastifyReply,
  session: AdminSession,
): Promise<void> {
  await adminSessionRepository.deleteByHash(request.server.db, session.idHash);
  reply.clearCookie(SESSION_COOKIE, adminCookieOptions(request));
}

// The flash may hold a raw credential for the moment between a redirect and the next page. It is
// sealed with a key derived from the raw session id, which only the browser has, so the stored
// value is useless to anyone reading the database.
function flashKey(rawId: string): Buffer {
  return Buffer.from(hkdfSync('sha256', rawId, 'safety-api-admin', 'flash', 32));
}

export async function setFlash(request: FastifyRequest, session: AdminSession, flash: Flash): Promise<void> {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', flashKey(session.rawId), iv);
  const sealed = Buffer.concat([cipher.update(JSON.stringify(flash), 'utf8'), cipher.final()]);
  const value = [iv, cipher.getAuthTag(), sealed].map((b) => b.toString('base64url')).join('.');
  await adminSessionRepository.setFlash(request.server.db, session.idHash, value);
}

/** Reads and deletes the flash; of two concurrent readers only one gets it. */
export async function takeFlash(request: FastifyRequest, session: AdminSession): Promise<Flash | null> {
  const value = session.sealedFlash;
  if (value === null) return null;
  if (!(await adminSessionRepository.clearFlash(request.server.db, session.idHash, value))) return null;
  const [iv, tag, sealed] = value.split('.').map((part) => Buffer.from(part, 'base64url'));
  if (iv === undefined || tag === undefined || sealed === undefined) return null;
  try {
    const decipher = createDecipheriv('aes-256-gcm', flashKey(session.rawId), iv);
    decipher.setAuthTag(tag);
    const text = Buffer.concat([decipher.update(sealed), decipher.final()]).toString('utf8');
    return JSON.parse(text) as Flash;
  } catch {
    return null;
  }
}
