import { type TSchema, Type } from 'typebox';
import {
  RECORD_EVENT_ACTIONS,
  RECORD_EVENT_KINDS,
  type RecordEventAction,
  type RecordEventKind,
  TEST_EVENT_TYPE,
} from '../webhooks/events.ts';
import { component } from './openapi.ts';
import { DepartmentSchema, IncidentSchema, LocationSchema, UserSchema } from './public.ts';

/**
 * The webhook events as the OpenAPI document's `webhooks` section describes them
 * (docs/webhooks.md): the body `src/webhooks/payload.ts` writes, and the three Standard Webhooks
 * headers `src/webhooks/signing.ts` signs it with.
 */

const OBJECTS: Record<RecordEventKind, TSchema> = {
  incident: IncidentSchema,
  user: UserSchema,
  department: DepartmentSchema,
  location: LocationSchema,
};

const pascal = (word: string) => word.charAt(0).toUpperCase() + word.slice(1);

const ACTION_TEXT: Record<RecordEventAction, string> = {
  created:
    "The record entered the public view after the endpoint's position: it is new, or back after a deletion. Sent once in its latest state, even if it changed again before the event left.",
  updated: "The record was in the public view at the endpoint's position and changed.",
  deleted:
    'The record left the public view (deleted, deactivated, or a vendor support user). `object` is null.',
};

const cursor = Type.String({
  description:
    'A `/changes` cursor just after this event: a receiver that lost events pulls the feed from the last one it stored',
});

function eventSchema(kind: RecordEventKind, action: RecordEventAction): TSchema {
  const type = `${kind}.${action}`;
  return component(
    `${pascal(kind)}${pascal(action)}Event`,
    Type.Object({
      type: Type.Literal(type),
      timestamp: Type.String({ format: 'date-time', description: 'When the change was made' }),
      data: Type.Object({
        id: Type.String({ format: 'uuid', description: `The ${kind}'s id` }),
        object: action === 'deleted' ? Type.Null() : OBJECTS[kind],
        seq: Type.Integer({ minimum: 1, description: "The change's place in the account's changes feed" }),
        changed_at: Type.String({ format: 'date-time' }),
        cursor,
      }),
    }),
  );
}

const TestEventSchema = component(
  'WebhookTestEvent',
  Type.Object({
    type: Type.Literal(TEST_EVENT_TYPE),
    timestamp: Type.String({ format: 'date-time', description: 'When the test was asked for' }),
    data: Type.Object({
      id: Type.String({ format: 'uuid', description: "The endpoint's id" }),
      object: Type.Null(),
      seq: Type.Null(),
      changed_at: Type.String({ format: 'date-time' }),
      cursor: Type.String({ description: "A `/changes` cursor at the feed's head when the test was sent" }),
    }),
  }),
);

export interface WebhookEventDoc {
  type: string;
  summary: string;
  description: string;
  schema: TSchema;
}

export const WEBHOOK_EVENTS: WebhookEventDoc[] = [
  ...RECORD_EVENT_KINDS.flatMap((kind) =>
    RECORD_EVENT_ACTIONS.map((action) => ({
      type: `${kind}.${action}`,
      summary: `A ${kind} was ${action}`,
      description: ACTION_TEXT[action],
      schema: eventSchema(kind, action),
    })),
  ),
  {
    type: TEST_EVENT_TYPE,
    summary: 'A test event',
    description:
      'Sent when a Super Admin or the CLI asks for one (`safety-api webhooks test`), whatever the filter.',
    schema: TestEventSchema,
  },
];

/** The three Standard Webhooks headers of every delivery. */
export const WEBHOOK_HEADERS = [
  {
    name: 'webhook-id',
    description:
      "The event's id: the same on every retry and resend of it, so a receiver can drop the events it already has.",
    schema: Type.String({ pattern: '^msg_' }),
    example: 'msg_2Zq8xWd1Hn5cKmT0pLr3YvB7aQe',
  },
  {
    name: 'webhook-timestamp',
    description:
      'Unix seconds of this attempt. Refuse a message much older than your clock (5 minutes) to stop replays.',
    schema: Type.String({ pattern: '^[0-9]+$' }),
    example: '1795581167',
  },
  {
    name: 'webhook-signature',
    description:
      "`v1,` and the base64 HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}`, keyed by the base64-decoded part of the endpoint's secret after `whsec_`. During a secret rotation's overlap two signatures, space-separated: accept the message when either verifies.",
    schema: Type.String({ pattern: '^v1,' }),
    example: 'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=',
  },
];
