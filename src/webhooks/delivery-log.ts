import type { Insertable } from 'kysely';
import type { WebhookAttemptsTable } from '../db/schema.ts';
import type { AttemptOutcome, SentRequest } from './attempt.ts';
import type { PostResult } from './outbound.ts';

/**
 * The delivery log's entries (docs/webhooks.md, "Delivery log"): each attempt that left, with the
 * request as sent (headers, the signature included, and body) and the answer (status, headers,
 * the first 4 KiB of its body). A secret is never part of either: the signature is an HMAC made
 * with it. `webhookRepository.recordAttempts` keeps each endpoint's log within its bounds.
 */

/** What the log says an attempt came to: the metrics' outcomes, but `not_sent`, which is never logged. */
export type LoggedOutcome = Exclude<AttemptOutcome, 'not_sent'>;

export const LOGGED_OUTCOMES: readonly LoggedOutcome[] = [
  'success',
  'http_error',
  'gone',
  'timeout',
  'network_error',
  'refused',
];

export interface LoggedAttempt {
  endpointId: string;
  webhookId: string;
  type: string;
  /** The change's seq; null for a test event. */
  seq: number | null;
  at: Date;
  request: SentRequest;
  result: PostResult;
  outcome: LoggedOutcome;
}

const bytes = (text: string | null) => (text === null ? 0 : Buffer.byteLength(text));

/** The log's row of an attempt, with the bytes it holds. */
export function attemptLogRow(attempt: LoggedAttempt): Insertable<WebhookAttemptsTable> {
  const { result } = attempt;
  const row = {
    endpoint_id: attempt.endpointId,
    webhook_id: attempt.webhookId,
    type: attempt.type,
    seq: attempt.seq,
    at: attempt.at.toISOString(),
    status: result.status,
    duration_ms: result.durationMs,
    error: result.error,
    request_headers: JSON.stringify(attempt.request.headers),
    request_body: attempt.request.body,
    response_headers: result.response === null ? null : JSON.stringify(result.response.headers),
    response_body: result.response?.body ?? null,
    outcome: attempt.outcome,
  };
  const size =
    bytes(row.webhook_id) +
    bytes(row.type) +
    bytes(row.error) +
    bytes(row.request_headers) +
    bytes(row.request_body) +
    bytes(row.response_headers) +
    bytes(row.response_body);
  return { ...row, size };
}

/**
 * The outcome of an attempt logged without one (by the release before migration 0014, during a
 * rolling upgrade), as that migration filled it in for the attempts logged before it.
 */
export function legacyOutcome(status: number | null, error: string | null): LoggedOutcome {
  if (status !== null) {
    if (status >= 200 && status < 300) return 'success';
    return status === 410 ? 'gone' : 'http_error';
  }
  if (error?.startsWith('refused') === true) return 'refused';
  if (error?.startsWith('no answer within') === true || error?.startsWith('could not connect') === true)
    return 'timeout';
  return 'network_error';
}
