import { parseArgs } from 'node:util';
import { InputError } from '../errors.ts';
import { buildServices } from '../services/services.ts';
import {
  ATTEMPTS_SHOWN,
  OUTCOME_FILTERS,
  type WebhookEndpointView,
  type WebhookService,
  parseAttemptQuery,
  parseOverlapHours,
} from '../services/webhook-service.ts';
import { EVENT_TYPES } from '../webhooks/events.ts';
import { OutboundClient } from '../webhooks/outbound.ts';
import { type Command, type CommandGroup, type Io, positionals } from './command.ts';
import { listForAccount, withDatabase } from './context.ts';

const ACTOR = 'cli';
const ENDPOINT_ID = '5f0c2a7e-3b1d-4e8f-9a6c-2d7b1e0f4a3c';

/**
 * Webhook endpoints change no key or account, so the commands have no generation to bump: they run
 * with `tellServers: false`, and the delivering instance hears of them through the database.
 */
function withWebhooks<T>(io: Io, work: (webhooks: WebhookService) => Promise<T>): Promise<T> {
  return withDatabase(
    io,
    async (_db, config, database) => {
      const outbound = new OutboundClient({
        allowPrivate: config.webhooksAllowPrivate,
        timeoutMs: config.webhookTimeoutMs,
      });
      try {
        return await work(buildServices(database, config, outbound).webhooks);
      } finally {
        await outbound.close();
      }
    },
    { tellServers: false },
  );
}

function describe(endpoint: WebhookEndpointView): string {
  return [
    endpoint.id,
    endpoint.state,
    endpoint.url,
    endpoint.events.join(','),
    `lag ${endpoint.lag}`,
    `last ${endpoint.last_attempt_at === null ? 'never' : `${endpoint.last_status ?? 'no answer'} at ${endpoint.last_attempt_at}`}`,
    ...(endpoint.disabled_reason === null ? [] : [`(${endpoint.disabled_reason})`]),
  ].join('  ');
}

const create: Command = {
  name: 'webhooks create',
  summary: "Register a URL that receives an account's changes as signed POSTs; prints its secret once",
  usage: ['safety-api webhooks create --account ID --url URL [--events TYPES] [--description TEXT] [--json]'],
  notes: [
    '--url          https:// on a public address (http:// and private addresses only with WEBHOOKS_ALLOW_PRIVATE=true)',
    `--events       comma-separated types or wildcards (default *): ${EVENT_TYPES.join(', ')}, incident.*, …`,
    '--json         one JSON object with id, url, events, state and secret (whsec_…, shown this once)',
    "It starts at the feed's head: it receives the changes made after its creation.",
  ],
  example:
    'safety-api webhooks create --account 0b5e6c1a-8d2f-4c3e-9a7b-1f2e3d4c5b6a --url https://bi.acme.example/hooks/safety --events "incident.*" --json',
  async run(args, io) {
    const { values } = parseArgs({
      args,
      options: {
        account: { type: 'string' },
        url: { type: 'string' },
        events: { type: 'string' },
        description: { type: 'string' },
        json: { type: 'boolean', default: false },
      },
    });
    const { account, url } = values;
    if (account === undefined || url === undefined)
      throw new InputError('webhooks create needs --account ID and --url URL');
    const { endpoint, secret } = await withWebhooks(io, (webhooks) =>
      webhooks.create({
        accountId: account,
        url,
        events: values.events,
        description: values.description,
        actor: ACTOR,
      }),
    );
    if (values.json) {
      io.out(JSON.stringify({ ...endpoint, secret }));
    } else {
      io.out(`Created ${describe(endpoint)}`);
      io.out(`Signing secret (shown once, store it now): ${secret}`);
    }
  },
};

const list: Command = {
  name: 'webhooks list',
  summary: "List an account's webhook endpoints with their state, lag and last delivery",
  usage: ['safety-api webhooks list --account ID [--json]'],
  example: 'safety-api webhooks list --account 0b5e6c1a-8d2f-4c3e-9a7b-1f2e3d4c5b6a --json',
  run: (args, io) =>
    listForAccount(
      args,
      io,
      { command: 'webhooks', empty: 'No webhook endpoints.' },
      (accountId) => withWebhooks(io, (webhooks) => webhooks.list(accountId)),
      describe,
    ),
};

const SHOW_USAGE =
  'usage: safety-api webhooks show ENDPOINT_ID [--outcome OUTCOME] [--type TYPES] [--limit N] [--json]';

const show: Command = {
  name: 'webhooks show',
  summary: `Show one endpoint and its last ${ATTEMPTS_SHOWN} delivery attempts, newest first`,
  usage: ['safety-api webhooks show ENDPOINT_ID [--outcome OUTCOME] [--type TYPES] [--limit N] [--json]'],
  notes: [
    `--outcome  only attempts that came to this: ${OUTCOME_FILTERS.join(', ')}`,
    '--type     only events of these types: comma-separated types or wildcards, as --events takes them',
    `--limit    how many attempts (default ${ATTEMPTS_SHOWN}, at most 1000: the log keeps the last 1000, 30 days)`,
    '--json     the endpoint, and each attempt with its request (headers as sent, body) and response',
    '           (status, headers, the first 4 KiB of the body); never a secret',
  ],
  example: `safety-api webhooks show ${ENDPOINT_ID} --outcome failure --type "incident.*" --json`,
  async run(args, io) {
    const { values, positionals: ids } = parseArgs({
      args,
      allowPositionals: true,
      options: {
        outcome: { type: 'string' },
        type: { type: 'string' },
        limit: { type: 'string' },
        json: { type: 'boolean', default: false },
      },
    });
    if (ids.length !== 1) throw new InputError(SHOW_USAGE);
    const endpointId = ids[0] as string;
    const query = { outcome: values.outcome, type: values.type, limit: values.limit };
    // Checked before the database is opened: bad input changes nothing, not even a migration.
    parseAttemptQuery(query);
    const endpoint = await withWebhooks(io, (webhooks) => webhooks.show(endpointId, undefined, query));
    if (values.json) {
      io.out(JSON.stringify(endpoint));
      return;
    }
    io.out(describe(endpoint));
    io.out(`cursor ${endpoint.cursor}`);
    if (endpoint.past_retention)
      io.out('Its position is older than the feed keeps: resend from latest to restart it.');
    for (const a of endpoint.attempts) {
      io.out(
        `  ${a.at}  ${a.webhook_id}  ${a.type}  ${a.status ?? '-'}  ${a.duration_ms} ms${a.error === null ? '' : `  ${a.error}`}`,
      );
    }
  },
};

const UPDATE_USAGE =
  'usage: safety-api webhooks update ENDPOINT_ID [--url URL] [--events TYPES] [--description TEXT] [--json]';

const update: Command = {
  name: 'webhooks update',
  summary: "Edit an endpoint's URL, event filter or description; its secret, position and state stay",
  usage: [
    'safety-api webhooks update ENDPOINT_ID [--url URL] [--events TYPES] [--description TEXT] [--json]',
  ],
  notes: [
    '--url          checked as for create: https:// on a public address unless WEBHOOKS_ALLOW_PRIVATE=true',
    '--events       comma-separated types or wildcards, as for create',
    '--description  "" removes it',
    '--json         the endpoint as show --json prints it',
    'Deliveries go on from the same position: the next attempt goes to the new URL, through the new filter.',
  ],
  example: `safety-api webhooks update ${ENDPOINT_ID} --url https://bi.acme.example/hooks/safety-v2 --events "incident.*"`,
  async run(args, io) {
    const { values, positionals: ids } = parseArgs({
      args,
      allowPositionals: true,
      options: {
        url: { type: 'string' },
        events: { type: 'string' },
        description: { type: 'string' },
        json: { type: 'boolean', default: false },
      },
    });
    if (ids.length !== 1) throw new InputError(UPDATE_USAGE);
    const { url, events, description } = values;
    if (url === undefined && events === undefined && description === undefined)
      throw new InputError(`nothing to change: give --url, --events or --description (${UPDATE_USAGE})`);
    const endpoint = await withWebhooks(io, (webhooks) =>
      webhooks.update(ids[0] as string, ACTOR, { url, events, description }),
    );
    io.out(values.json ? JSON.stringify(endpoint) : `Updated ${describe(endpoint)}`);
  },
};

const STATE_CHANGES = {
  disable: 'Stop deliveries to an endpoint; its position is kept',
  enable: 'Resume deliveries after the last delivered position',
  delete: 'Delete an endpoint and its delivery log',
} as const;

const stateChanges: Command[] = (Object.keys(STATE_CHANGES) as (keyof typeof STATE_CHANGES)[]).map(
  (action) => ({
    name: `webhooks ${action}`,
    summary: STATE_CHANGES[action],
    usage: [`safety-api webhooks ${action} ENDPOINT_ID`],
    example: `safety-api webhooks ${action} ${ENDPOINT_ID}`,
    async run(args, io) {
      const [endpointId] = positionals(args, 1, `safety-api webhooks ${action} ENDPOINT_ID`) as [string];
      await withWebhooks(io, async (webhooks) => {
        if (action === 'delete') {
          await webhooks.delete(endpointId, ACTOR);
          io.out(`Deleted webhook endpoint ${endpointId}.`);
        } else {
          io.out(describe(await webhooks[action](endpointId, ACTOR)));
        }
      });
    },
  }),
);

const rotateSecret: Command = {
  name: 'webhooks rotate-secret',
  summary:
    'Give an endpoint a new signing secret (printed once); the old one keeps signing during the overlap',
  usage: ['safety-api webhooks rotate-secret ENDPOINT_ID [--overlap-hours N] [--json]'],
  notes: [
    '--overlap-hours  hours the replaced secret signs beside the new one (default 24); earlier secrets',
    '                 keep their own expiry; 0 ends every earlier secret now',
    '--json           { "secret" }',
  ],
  example: `safety-api webhooks rotate-secret ${ENDPOINT_ID} --overlap-hours 48`,
  async run(args, io) {
    const { values, positionals: ids } = parseArgs({
      args,
      allowPositionals: true,
      options: { 'overlap-hours': { type: 'string' }, json: { type: 'boolean', default: false } },
    });
    if (ids.length !== 1)
      throw new InputError(
        'usage: safety-api webhooks rotate-secret ENDPOINT_ID [--overlap-hours N] [--json]',
      );
    const overlapHours = parseOverlapHours(values['overlap-hours']);
    const rotated = await withWebhooks(io, (webhooks) =>
      webhooks.rotateSecret(ids[0] as string, ACTOR, { overlapHours }),
    );
    if (values.json) {
      io.out(JSON.stringify({ secret: rotated.secret }));
      return;
    }
    io.out(`New signing secret (shown once, store it now): ${rotated.secret}`);
    io.out(
      rotated.previous_secrets_expire_at.length === 0
        ? 'No earlier secret signs any more.'
        : `Earlier secrets sign too, each until its own expiry: ${rotated.previous_secrets_expire_at.join(', ')}.`,
    );
  },
};

const test: Command = {
  name: 'webhooks test',
  summary: 'Send a signed webhook.test event to an endpoint now and print what it answered',
  usage: ['safety-api webhooks test ENDPOINT_ID'],
  notes: ['Exits non-zero when the endpoint does not answer with a 2xx.'],
  example: `safety-api webhooks test ${ENDPOINT_ID}`,
  async run(args, io) {
    const [endpointId] = positionals(args, 1, 'safety-api webhooks test ENDPOINT_ID') as [string];
    const result = await withWebhooks(io, (webhooks) => webhooks.sendTest(endpointId));
    if (result.status === null || result.status < 200 || result.status >= 300)
      throw new Error(`the test event ${result.webhook_id} failed: ${result.error ?? 'no answer'}`);
    io.out(`Delivered test event ${result.webhook_id}: HTTP ${result.status} in ${result.durationMs} ms.`);
  },
};

const resend: Command = {
  name: 'webhooks resend',
  summary: 'Send again every change after a /changes cursor (or restart at the head with latest)',
  usage: ['safety-api webhooks resend ENDPOINT_ID --cursor CURSOR|latest'],
  notes: [
    '--cursor  a cursor from an event (data.cursor) or from /changes; "latest" skips to the head',
    'Events sent again carry the same webhook-id as the first time.',
  ],
  example: `safety-api webhooks resend ${ENDPOINT_ID} --cursor latest`,
  async run(args, io) {
    const { values, positionals: ids } = parseArgs({
      args,
      allowPositionals: true,
      options: { cursor: { type: 'string' } },
    });
    if (ids.length !== 1 || values.cursor === undefined || values.cursor === '')
      throw new InputError('usage: safety-api webhooks resend ENDPOINT_ID --cursor CURSOR|latest');
    const cursor = values.cursor;
    const endpoint = await withWebhooks(io, (webhooks) => webhooks.resend(ids[0] as string, cursor, ACTOR));
    io.out(describe(endpoint));
  },
};

const redeliver: Command = {
  name: 'webhooks redeliver',
  summary: 'Send one event of the delivery log again now: same webhook-id and body, a new signature',
  usage: ['safety-api webhooks redeliver ENDPOINT_ID WEBHOOK_ID'],
  notes: [
    'WEBHOOK_ID  the msg_… id of a delivered or failed event, as `show` lists it (the log keeps the',
    '            last 1000 attempts, 30 days)',
    'Logged and audited; the position does not move. Exits non-zero when the endpoint does not answer with a 2xx.',
  ],
  example: `safety-api webhooks redeliver ${ENDPOINT_ID} msg_2bQx7c1k9ZyLm3PqR8sT4uVwX0a`,
  async run(args, io) {
    const [endpointId, webhookId] = positionals(
      args,
      2,
      'safety-api webhooks redeliver ENDPOINT_ID WEBHOOK_ID',
    ) as [string, string];
    const result = await withWebhooks(io, (webhooks) => webhooks.redeliver(endpointId, webhookId, ACTOR));
    if (result.status === null || result.status < 200 || result.status >= 300)
      throw new Error(`the redelivery of ${result.webhook_id} failed: ${result.error ?? 'no answer'}`);
    io.out(
      `Redelivered ${result.webhook_id} (${result.type}): HTTP ${result.status} in ${result.durationMs} ms.`,
    );
  },
};

const skip: Command = {
  name: 'webhooks skip',
  summary: 'Pass the event a failing endpoint is stuck on: its position moves just past it',
  usage: ['safety-api webhooks skip ENDPOINT_ID'],
  notes: [
    'The event counts as sent, as one the filter leaves out does; the next one is tried at once.',
    'Refused unless the endpoint is failing on an event. Audited.',
  ],
  example: `safety-api webhooks skip ${ENDPOINT_ID}`,
  async run(args, io) {
    const [endpointId] = positionals(args, 1, 'safety-api webhooks skip ENDPOINT_ID') as [string];
    const { skipped, endpoint } = await withWebhooks(io, (webhooks) => webhooks.skip(endpointId, ACTOR));
    io.out(
      `Skipped ${skipped.webhook_id} (${skipped.type} ${skipped.record_id}, seq ${skipped.seq}); the next event is sent at once.`,
    );
    io.out(describe(endpoint));
  },
};

export const webhooksCommands: CommandGroup = {
  name: 'webhooks',
  summary: 'Manage webhook endpoints: the changes feed pushed as signed POSTs',
  subcommands: [create, list, show, update, ...stateChanges, rotateSecret, test, resend, redeliver, skip],
};
