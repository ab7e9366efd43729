import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import type { WebhookEvent } from './types.ts';

export { WebhookVerificationError };

/** A request's headers as Node's `http` module (`req.headers`) or the Fetch API gives them. */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

const SIGNATURE_HEADERS = ['webhook-id', 'webhook-timestamp', 'webhook-signature'] as const;

function headerValue(headers: WebhookHeaders, name: string): string {
  if (headers instanceof Headers) return headers.get(name) ?? '';
  const [, value] = Object.entries(headers).find(([key]) => key.toLowerCase() === name) ?? [];
  return (Array.isArray(value) ? value[0] : value) ?? '';
}

/**
 * The parsed body is the service's, once its signature verifies; this checks only what tells events
 * apart, so that an event type newer than this SDK still reaches the receiver.
 */
function isWebhookEvent(value: unknown): value is WebhookEvent {
  return (
    typeof value === 'object' &&
    value !== null &&
    'type' in value &&
    typeof value.type === 'string' &&
    'data' in value &&
    typeof value.data === 'object' &&
    value.data !== null
  );
}

/**
 * The event a webhook request carries, once its Standard Webhooks signature verifies with `secret`
 * (`whsec_…`; while earlier secrets are in their rotation's overlap, any one secret's signature is accepted) and its timestamp is within
 * five minutes of this clock (which stops replays). `body` must be the raw body as it arrived.
 * Throws a WebhookVerificationError otherwise.
 */
export function verifyWebhook(
  body: string | Uint8Array,
  headers: WebhookHeaders,
  secret: string,
): WebhookEvent {
  const payload = typeof body === 'string' ? body : new TextDecoder().decode(body);
  const event = new Webhook(secret).verify(
    payload,
    Object.fromEntries(SIGNATURE_HEADERS.map((name) => [name, headerValue(headers, name)])),
  );
  if (!isWebhookEvent(event)) throw new WebhookVerificationError('The body is not a webhook event');
  return event;
}
