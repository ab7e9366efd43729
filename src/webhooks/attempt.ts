import type { KeyObject } from 'node:crypto';
import type { LeasedEndpointRow } from '../db/repositories/webhooks.ts';
import { inSpan } from '../telemetry/tracing.ts';
import { type OutboundClient, outboundHeaders, type PostResult } from './outbound.ts';
import { changeEventBody, type EventChange } from './payload.ts';
import { changeWebhookId, signedHeaders } from './signing.ts';

/**
 * An attempt: one change's event, signed and POSTed to the endpoint, and what came of it. Records
 * nothing; `record-outcome.ts` does.
 */

/**
 * What an attempt came to. `not_sent`: the request never left, and not through the receiver's fault
 * (no free connection in time, or the lease would not cover it once it had one): nothing is recorded
 * against the endpoint, and the event is tried again shortly.
 */
export type AttemptOutcome =
  'success' | 'http_error' | 'gone' | 'timeout' | 'network_error' | 'refused' | 'not_sent';

export function outcomeOf(result: PostResult): AttemptOutcome {
  if (result.status !== null) {
    if (result.status >= 200 && result.status < 300) return 'success';
    return result.status === 410 ? 'gone' : 'http_error';
  }
  return result.failure ?? 'network_error';
}

/** Issues `/changes` cursors: the feed's codec (`ChangeCursors`), handed in by the composition root. */
export interface CursorIssuer {
  encode(accountId: string, at: { position: number; bound: number; issuedAt: number }): string;
}

export interface AttemptInput {
  endpoint: Pick<LeasedEndpointRow, 'id' | 'account_id' | 'url'>;
  change: EventChange;
  /** The event type (`incident.created`, …): what this endpoint was told of the record decides it. */
  type: string;
  /** The endpoint's signing keys: its secret and those of its rotation overlap. */
  keys: KeyObject[];
  cursors: CursorIssuer;
  outbound: OutboundClient;
  /** Ends the attempt early (the worker stopped). */
  signal: AbortSignal;
  /** Asked once the request has its connection: a reason not to send it, or null. */
  beforeSend: () => string | null;
}

/** A request as the delivery log keeps it: every header sent (the signature, never a secret) and the body. */
export interface SentRequest {
  headers: Record<string, string>;
  body: string;
}

interface AttemptMade {
  webhookId: string;
  type: string;
  /** When the attempt started. */
  at: Date;
  request: SentRequest;
  result: PostResult;
}

/** An attempt whose request left: the receiver's answer, or its failure to give one. */
export type SentAttempt = AttemptMade & { outcome: Exclude<AttemptOutcome, 'not_sent'> };
export type Attempt = SentAttempt | (AttemptMade & { outcome: 'not_sent' });

export async function attempt({
  endpoint,
  change,
  type,
  keys,
  cursors,
  outbound,
  signal,
  beforeSend,
}: AttemptInput): Promise<Attempt> {
  const webhookId = changeWebhookId(endpoint.id, change.seq);
  const cursor = cursors.encode(endpoint.account_id, {
    position: change.seq,
    bound: change.seq,
    issuedAt: Math.floor(Date.now() / 1000),
  });
  const body = changeEventBody(type, change, cursor);
  const at = new Date();
  const headers = signedHeaders(webhookId, Math.floor(at.getTime() / 1000), body, keys);
  const result = await inSpan(
    'webhook.attempt',
    {
      kind: 'client',
      root: true,
      attributes: {
        'webhook.endpoint_id': endpoint.id,
        'webhook.id': webhookId,
        'webhook.event_type': type,
      },
      describe: (answer) => {
        const outcome = outcomeOf(answer);
        return {
          ...(answer.status === null ? {} : { 'http.response.status_code': answer.status }),
          ...(outcome === 'success' ? {} : { 'error.type': outcome }),
        };
      },
    },
    () => outbound.post(endpoint.url, { ...headers }, body, { signal, beforeSend }),
  );
  return {
    webhookId,
    type,
    at,
    request: { headers: outboundHeaders({ ...headers }), body },
    result,
    outcome: outcomeOf(result),
  };
}
