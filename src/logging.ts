import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyRequest } from 'fastify';
import { activeTracing } from './telemetry/tracing.ts';

/**
 * What the request log may show. Nothing secret is ever logged (DESIGN "Secrets in logs"): the
 * request line is logged with secret-bearing query values and key-shaped strings replaced, headers
 * are never logged at all (so `Authorization` and `Cookie` cannot leak), and a caller's request id
 * that looks like a credential is not taken.
 */

export const REDACTED = '[redacted]';

/** Query parameters whose value is a credential in some client's hands (OAuth 2, API keys, sign-in). */
const SECRET_QUERY_PARAMETERS = new Set([
  'api_key',
  'key',
  'access_token',
  'token',
  'refresh_token',
  'code',
  'client_secret',
  'password',
  'login_hint',
]);

// An API key anywhere in the URL, also with any of its characters percent-encoded (`svc%5f…`).
const API_KEY_IN_URL = /svc(?:_|%5f)(?:[0-9a-f]|%[0-9a-f]{2}){40}/gi;

function decodedName(name: string): string {
  try {
    return decodeURIComponent(name.replace(/\+/g, ' ')).toLowerCase();
  } catch {
    return name.toLowerCase();
  }
}

/**
 * The URL as it may be logged: every value of a secret-bearing query parameter (matched however
 * its name is encoded or capitalized) and every key-shaped string replaced by `[redacted]`.
 */
export function redactUrl(url: string): string {
  const withoutKeys = url.replace(API_KEY_IN_URL, REDACTED);
  const queryStart = withoutKeys.indexOf('?');
  if (queryStart === -1) return withoutKeys;
  const query = withoutKeys
    .slice(queryStart + 1)
    .split('&')
    .map((pair) => {
      const equals = pair.indexOf('=');
      const name = equals === -1 ? pair : pair.slice(0, equals);
      return equals !== -1 && SECRET_QUERY_PARAMETERS.has(decodedName(name)) ? `${name}=${REDACTED}` : pair;
    })
    .join('&');
  return `${withoutKeys.slice(0, queryStart + 1)}${query}`;
}

// A caller's request id is taken only if it is short and plain, so it cannot forge log lines…
const PLAIN_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
// …and does not look like a credential: an API key; a JWT (each part is base64url JSON, `{"` is
// `eyJ`); or a random token, i.e. a run of 20 or more base64url characters mixing upper case,
// lower case and digits (oidc-provider's tokens and codes, client secrets). UUIDs and hex trace
// ids have no such run, so they pass.
const KEY_SHAPED = /svc_[0-9a-f]{40}/i;
const JWT_PART = /(?:^|\.)eyJ/;
const BASE64URL_RUN = /[A-Za-z0-9_-]{20,}/g;

function looksLikeSecret(id: string): boolean {
  if (KEY_SHAPED.test(id) || JWT_PART.test(id)) return true;
  for (const [run] of id.matchAll(BASE64URL_RUN)) {
    if (/[A-Z]/.test(run) && /[a-z]/.test(run) && /[0-9]/.test(run)) return true;
  }
  return false;
}

/** The id of a request: the caller's `X-Request-Id` when it is plain and not secret-shaped, else a new UUID. */
export function requestId(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && PLAIN_REQUEST_ID.test(given) && !looksLikeSecret(given)
    ? given
    : randomUUID();
}

/**
 * Fastify's request serializer without the secrets: the same fields, the URL redacted. Used for
 * every `req` in a log line (incoming request, errors).
 */
function serializeRequest(request: FastifyRequest): Record<string, unknown> {
  return {
    method: request.method,
    url: redactUrl(request.url),
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}

/**
 * With tracing on, every log line written while a span is active carries its `trace_id` and
 * `span_id`; with it off, the logger has no mixin at all.
 */
export function traceIdsInLogs(): { mixin?: () => Record<string, string> } {
  const tracing = activeTracing();
  return tracing === null ? {} : { mixin: tracing.logFields };
}

/** The pino options of the application's logger. */
export function loggerOptions(level: string) {
  return { level, serializers: { req: serializeRequest }, ...traceIdsInLogs() };
}
