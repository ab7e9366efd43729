import { type TSchema, Type } from 'typebox';
import {
  RECORD_EVENT_ACTIONS,
  RECORD_EVENT_KINDS,
  type RecordEventAction,
  type RecordEventKind,
  TEST_EVENT_TYPE,
} from '../webhooks/events.ts';
import { component } from './openapi.ts';
import {
  DEPARTMENT_EXAMPLE,
  DepartmentSchema,
  INCIDENT_EXAMPLE,
  IncidentSchema,
  LOCATION_EXAMPLE,
  LocationSchema,
  USER_EXAMPLE,
  UserSchema,
} from './public.ts';

/**
 * The webhook events as the OpenAPI document's `webhooks` section describes them
 * (docs/webhooks.md): the body `src/webhooks/payload.ts` writes, the three Standard Webhooks
 * headers `src/webhooks/signing.ts` signs it with, and what the delivery worker
 * (`src/webhooks/record-outcome.ts`) does with the receiver's answer.
 */

/** `object` in a record's event: the very schema the list endpoints render that record with. */
const OBJECTS: Record<RecordEventKind, TSchema> = {
  incident: IncidentSchema,
  user: UserSchema,
  department: DepartmentSchema,
  location: LocationSchema,
};

const OBJECT_EXAMPLES: Record<RecordEventKind, { id: string }> = {
  incident: INCIDENT_EXAMPLE,
  user: USER_EXAMPLE,
  department: DEPARTMENT_EXAMPLE,
  location: LOCATION_EXAMPLE,
};

/** What the examples show: a change at seq 1043, made at EXAMPLE_AT, and a cursor just after it. */
const EXAMPLE_SEQ = 1043;
const EXAMPLE_AT = '2026-11-25T09:41:12.000Z';
const EXAMPLE_CURSOR = 'AQAAAAAEEwAAAAAEE2sGrTlx0kmCzxuCqIWnEytRqWJ6';
const EXAMPLE_ENDPOINT_ID = '5f0c2a7e-3b1d-4e8f-9a6c-2d7b1e0f4a3c';

const pascal = (word: string) => word.charAt(0).toUpperCase() + word.slice(1);

const ACTION_TEXT: Record<RecordEventAction, string> = {
  created:
    'This endpoint has not been sent the record since it last entered the public view: it is new, or back after a deletion. Sent once in its latest state, even if it changed again before the event left.',
  updated:
    "This endpoint was sent the record since it last entered the public view (or the record was in the view when the endpoint's position was set), and it changed.",
  deleted:
    'The record left the public view (deleted, deactivated, or a vendor support user). `object` is null. It may name a record this endpoint was never sent: one created and removed before its event left, or one that never was in the public view.',
};

const timestamp = (description: string) => Type.String({ format: 'date-time', description });

const cursor = Type.String({
  description:
    'A `/changes` cursor just after this event: a receiver that lost events pulls the feed from the last one it stored',
});

function eventSchema(kind: RecordEventKind, action: RecordEventAction): TSchema {
  const type = `${kind}.${action}`;
  const example = {
    type,
    timestamp: EXAMPLE_AT,
    data: {
      id: OBJECT_EXAMPLES[kind].id,
      object: action === 'deleted' ? null : OBJECT_EXAMPLES[kind],
      seq: EXAMPLE_SEQ,
      changed_at: EXAMPLE_AT,
      cursor: EXAMPLE_CURSOR,
    },
  };
  return component(
    `${pascal(kind)}${pascal(action)}Event`,
    Type.Object(
      {
        type: Type.Literal(type),
        timestamp: timestamp('When the change was made (the same as `data.changed_at`)'),
        data: Type.Object({
          id: Type.String({ format: 'uuid', description: `The ${kind}'s id` }),
          object: action === 'deleted' ? Type.Null() : OBJECTS[kind],
          seq: Type.Integer({ minimum: 1, description: "The change's place in the account's changes feed" }),
          changed_at: timestamp('When the change was made'),
          cursor,
        }),
      },
      { examples: [example] },
    ),
  );
}

const TestEventSchema = component(
  'WebhookTestEvent',
  Type.Object(
    {
      type: Type.Literal(TEST_EVENT_TYPE),
      timestamp: timestamp('When the test was sent'),
      data: Type.Object({
        id: Type.String({ format: 'uuid', description: "The endpoint's id" }),
        object: Type.Null(),
        seq: Type.Null(),
        changed_at: timestamp('When the test was sent'),
        cursor: Type.String({
          description: "A `/changes` cursor at the feed's head when the test was sent",
        }),
      }),
    },
    {
      examples: [
        {
          type: TEST_EVENT_TYPE,
          timestamp: EXAMPLE_AT,
          data: {
            id: EXAMPLE_ENDPOINT_ID,
            object: null,
            seq: null,
            changed_at: EXAMPLE_AT,
            cursor: EXAMPLE_CURSOR,
          },
        },
      ],
    },
  ),
);

/** What the receiver's answer does: to a change's event, and to a test event. */
const CHANGE_RESPONSES = {
  '2XX': {
    description: "Accepted: the endpoint's position moves past this event, and the next one is sent.",
  },
  '410': {
    description:
      'Gone: the endpoint is disabled at once, with the reason recorded; nothing more is sent until a Super Admin enables it again.',
  },
  default: {
    description:
      'Any other status (a redirect too: none is followed), or no answer within WEBHOOK_TIMEOUT_MS: the event is sent again after about 5 s, 5 min, 30 min, 2 h, 5 h, then every 10 h (each ±20%), while later events wait. An endpoint failing for WEBHOOK_DISABLE_AFTER_HOURS (72 by default) is disabled.',
  },
};

const TEST_RESPONSES = {
  '2XX': { description: 'The test passed: the answer is shown to whoever sent it.' },
  '410': {
    description: 'A failed test like any other: unlike a change event, it does not disable the endpoint.',
  },
  default: {
    description:
      'The test failed (any other status, a redirect, or no answer in time): shown to whoever sent it and kept in the delivery log. A test event is never retried and changes nothing about the endpoint.',
  },
};

export interface WebhookEventDoc {
  type: string;
  summary: string;
  description: string;
  schema: TSchema;
  responses: Record<string, { description: string }>;
}

export const WEBHOOK_EVENTS: WebhookEventDoc[] = [
  ...RECORD_EVENT_KINDS.flatMap((kind) =>
    RECORD_EVENT_ACTIONS.map((action) => ({
      type: `${kind}.${action}`,
      summary: `${kind === 'incident' ? 'An' : 'A'} ${kind} was ${action}`,
      description: ACTION_TEXT[action],
      schema: eventSchema(kind, action),
      responses: CHANGE_RESPONSES,
    })),
  ),
  {
    type: TEST_EVENT_TYPE,
    summary: 'A test event',
    description:
      "Sent once, when a Super Admin (endpoint page) or the CLI (`safety-api webhooks test`) asks for one, whatever the endpoint's filter and state. It does not move the endpoint's position.",
    schema: TestEventSchema,
    responses: TEST_RESPONSES,
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
      'Unix seconds of this attempt (not of the change): a retry carries a new one. Refuse a message much older than your clock (5 minutes) to stop replays.',
    schema: Type.String({ pattern: '^[0-9]+$' }),
    example: '1795599673',
  },
  {
    name: 'webhook-signature',
    description:
      "`v1,` and the base64 HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}`, keyed by the base64-decoded part of the endpoint's secret after `whsec_`. While earlier secrets are in their rotation's overlap, one signature per secret, space-separated, the current secret's first: accept the message when any of them verifies.",
    schema: Type.String({ pattern: '^v1,' }),
    example: 'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=',
  },
];
