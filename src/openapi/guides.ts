import { ERROR_CODES } from '../errors.ts';
import { OAUTH_PATH, PUBLIC_API_PATH, WIDER_API_PATH } from '../paths.ts';

/**
 * The reference's guides: the document's `info.description`. Its `##` headings are top-level
 * entries of Scalar's sidebar, and its search finds them. Each guide says what the operations of
 * its subject share, with examples that run as they are against `baseUrl`, reading credentials
 * from environment variables (test/openapi/guides.test.ts runs the `sh` blocks, and type-checks
 * and runs the `ts` ones). The error codes are listed from `ERROR_CODES`, the list the API
 * answers from; the same test holds the page sizes stated here to the routes' own.
 */

/** The headings of the guides after the overview, in their order on the page. */
export const GUIDES = [
  'Authentication',
  'Errors',
  'Pagination',
  'Rate limits and ETags',
  'Keeping a copy in sync',
  'Webhooks and verifying them',
] as const;

/** The API key as every example sends it. */
export const KEY_HEADER = '-H "Authorization: Bearer $SAFETY_API_KEY"';

/** The line of a TypeScript example that makes the SDK's client. */
export const sdkClient = (baseUrl: string) =>
  `const client = createClient({\n  baseUrl: '${baseUrl}',\n  apiKey: process.env.SAFETY_API_KEY ?? '',\n});`;

const fence = (language: 'sh' | 'ts' | 'json', code: string) => `\`\`\`${language}\n${code.trim()}\n\`\`\``;

const errorCodes = () =>
  Object.entries(ERROR_CODES)
    .map(([code, { status, when }]) => `- **${status} \`${code}\`**: ${when}`)
    .join('\n');

export function guides(baseUrl: string): string {
  const publicApi = `${baseUrl}${PUBLIC_API_PATH}`;
  const oauth = `${baseUrl}${OAUTH_PATH}`;
  return `## Overview

Read an account's safety incidents, users, departments and locations.

- **Public API** (\`${PUBLIC_API_PATH}\`): an API key, \`Authorization: Bearer svc_…\`.
- **Wider API** (\`${WIDER_API_PATH}\`): an OAuth 2 access token of one of the account's registered clients; lists paged with \`_start\` and \`_limit\`.
- **OAuth 2** (\`${OAUTH_PATH}\`): the authorization server that issues those tokens.
- **Health** (\`/healthz\`, \`/readyz\`): probes, without a credential.

Every response carries \`X-Request-Id\`; every counted response of the two APIs the \`X-RateLimit-*\` headers of the hourly allowance. \`HEAD\` behaves as \`GET\` without a body. Each operation shows its request in curl and with the TypeScript SDK; the guides below say what the operations share. The examples read the API key from \`SAFETY_API_KEY\`, an access token from \`ACCESS_TOKEN\`.

## Authentication

Every request to the public API carries an API key of the account, \`svc_\` followed by 40 lowercase hex characters:

${fence('sh', `curl -s "${publicApi}/users" ${KEY_HEADER}`)}

- A Super Admin creates keys in the admin panel (Settings › Integrations › API Keys) or with \`safety-api keys create\`. The key is shown once; only its hash is kept. Use one key per integration; a lost key is revoked and replaced, and \`safety-api keys roll\` makes a successor while the old key still works for an overlap.
- The key decides the account: every answer holds that account's records, and no parameter names another.
- Scopes are \`read\`, \`read-write\` and \`admin\`. The API is read-only, so a \`read\` key reaches every operation.
- The checks, in order: the header (401 \`API_KEY_REQUIRED\`), the key (401 \`API_KEY_INVALID\`), the account's plan (403 \`FEATURE_NOT_AVAILABLE\`), the key's scope for the method (403 \`INSUFFICIENT_SCOPE\`), the hourly allowance (429). A 401 carries \`WWW-Authenticate\`. Disabling or revoking a key takes effect at its next request.
- Use HTTPS only. A key belongs on a server: never in a browser (the API sends no CORS headers) or a repository.

The wider API takes an OAuth 2 access token instead (an API key there is 401), issued by \`${OAUTH_PATH}\` to a client a Super Admin registered for the account. A program of your own uses the client credentials grant; an app acting for a person, the authorization code grant with PKCE (\`/authorize\`, then \`/token\`):

${fence(
  'sh',
  `
curl -s "${oauth}/token" -u "$CLIENT_ID:$CLIENT_SECRET" \\
  -d grant_type=client_credentials -d scope=incidents:read`,
)}

Send its \`access_token\` as \`Authorization: Bearer …\` to \`${WIDER_API_PATH}/incidents\` and the other lists; it is valid for an hour (\`expires_in\`).

## Errors

An error is JSON with \`error\` and \`message\`. Where a client must tell the cases apart, \`error\` is a code (schema \`CodedError\`):

${fence('json', `{ "error": "API_KEY_INVALID", "message": "The API key is unknown, disabled, revoked or expired." }`)}

${errorCodes()}

Any other error has \`"error": true\` (schema \`Error\`):

- **404**: an incident id that is absent, malformed or another account's (\`Incident not found\`), or a path no operation takes (\`Not found\`), after the credential checks.
- **405**: a write method with a \`read-write\` or \`admin\` key (below).
- **413**: a request body over 1 MiB.
- **500**: an unexpected failure; never a stack or SQL.
- **503**: the database is unavailable, or the instance is shutting down: retry after \`Retry-After\` seconds. Never a sign that the key is wrong: keep it.
- **400, 401, 403 on the wider API**: a \`_start\` or \`_limit\` that is not a whole number, or below its minimum; no valid access token; a token without the list's scope (\`WWW-Authenticate\` names it).

Branch on the status and \`error\`, never on \`message\`, which is for people. Quote a response's \`X-Request-Id\` when you report a problem. The OAuth 2 endpoints answer as RFC 6749 says: \`{ "error": "invalid_grant", "error_description": "…" }\`.

**Read-only.** The two APIs take \`GET\` and \`HEAD\` only, and list no other method. Any other method on any of their paths (\`POST\`, \`PUT\`, \`PATCH\`, \`DELETE\`, \`OPTIONS\`…) gets the same credential, plan and rate-limit answers as a read (401, 403 \`FEATURE_NOT_AVAILABLE\`, 429), and then: on the public API, a \`read\` key 403 \`INSUFFICIENT_SCOPE\` (a \`CodedError\`), a \`read-write\` or \`admin\` key 405; on the wider API, 405. The 405 carries \`Allow: GET, HEAD\` and the \`X-RateLimit-*\` headers, and its body is an \`Error\`: \`{ "error": true, "message": "Method not allowed: this API is read-only." }\`.

The SDK throws a \`SafetyApiError\` with \`status\`, \`code\` (the \`error\` code, or null), \`message\` and \`requestId\`; its subclasses \`AuthenticationError\` (401), \`PermissionError\` (403), \`NotFoundError\` (404), \`RateLimitError\` (429) and \`ServiceUnavailableError\` (503) name the common cases:

${fence(
  'ts',
  `
import { createClient, NotFoundError, SafetyApiError } from '@safety-incident/sdk';

${sdkClient(baseUrl)}
try {
  await client.getIncident('00000000-0000-4000-8000-000000000000');
} catch (error) {
  if (error instanceof NotFoundError) console.log('no such incident');
  else if (error instanceof SafetyApiError) console.log(error.status, error.code, error.requestId);
  else throw error;
}`,
)}

## Pagination

The two APIs page differently.

**The public API** pages the incidents by number, newest first: \`page\` from 1 (default 1) and \`limit\` up to 200 (default 50). It never answers 400 for them: a value that is not a whole number of at least 1 means the default, a larger \`limit\` means 200, and a page past the last is empty. \`data.pagination\` holds \`page\`, \`limit\`, \`total\` and \`pages\`: read on while \`page\` is below \`pages\`.

${fence('sh', `curl -s "${publicApi}/incidents?page=1&limit=200" ${KEY_HEADER}`)}

\`/users\`, \`/departments\` and \`/locations\` are not paged: one answer holds every active record, by name. The changes feed pages by cursor (Keeping a copy in sync).

**The wider API** pages every list by offset: \`_start\` (default 0) and \`_limit\` (default 20, at most 100; a larger one means 100). The body is \`{ "response": […], "pagination": { "totalRecords", "perPage", "totalPages", "start", "currentPage" } }\`: the next page starts at \`start\` + \`perPage\`, and more exist while \`currentPage\` is below \`totalPages\`. A \`_start\` below 0 or a \`_limit\` below 1, or one that is not a whole number, is 400.

${fence('sh', `curl -s "${baseUrl}${WIDER_API_PATH}/incidents?_start=0&_limit=100" -H "Authorization: Bearer $ACCESS_TOKEN"`)}

Pages are computed at request time, so an import while you walk them can move a record from one page to the next. For a consistent copy, use an export and the changes feed. The SDK's iterators walk every page, at the largest size:

${fence(
  'ts',
  `
import { createClient } from '@safety-incident/sdk';

${sdkClient(baseUrl)}
let open = 0;
for await (const incident of client.incidents()) if (incident.status === 'open') open += 1;
console.log(open, 'open incidents');`,
)}

## Rate limits and ETags

Each API key (each OAuth client on the wider API) has an hourly allowance, the account's (1,000 requests unless the account has another), in a fixed one-hour window opened by its first counted request. Every counted answer carries:

- \`X-RateLimit-Limit\`: the hourly allowance;
- \`X-RateLimit-Remaining\`: the requests left in this window;
- \`X-RateLimit-Reset\`: when the window ends, as absolute Unix seconds (not a countdown).

Past the allowance the answer is 429 \`RATE_LIMIT_EXCEEDED\` with \`Retry-After\` (seconds to wait), \`X-RateLimit-Limit\` and \`X-RateLimit-Remaining: 0\`, and no \`X-RateLimit-Reset\`. Not counted: 401, 403, 429 and 304 answers. An export is one request, however large.

**ETags.** Every 200 of the public lists and of one incident carries a strong \`ETag\`. Send it back in \`If-None-Match\`: while the data is unchanged the answer is 304 Not Modified, without a body, and it is not counted (it still needs a valid key). The changes feed and the exports have no ETag. This asks twice and prints \`304\`:

${fence(
  'sh',
  `
users="${publicApi}/users"
etag=$(curl -s "$users" ${KEY_HEADER} -o /dev/null -D - | grep -i '^etag:' | cut -d' ' -f2 | tr -d '\\r')
curl -s "$users" ${KEY_HEADER} -H "If-None-Match: $etag" -o /dev/null -w '%{http_code}\\n'`,
)}

The SDK retries a 429 or 503 after its \`Retry-After\` (within a budget, \`retry\`), and with \`etagCache: true\` asks again with \`If-None-Match\` and answers a 304 from what it kept.

## Keeping a copy in sync

1. **Export** each resource once: \`GET ${PUBLIC_API_PATH}/exports/{incidents,users,departments,locations}.{ndjson,csv}\` streams the whole set from one snapshot as one counted request (gzip with \`Accept-Encoding: gzip\`). Its \`X-Changes-Cursor\` header is the feed position of that snapshot.
2. **Follow the changes feed** from there: \`GET ${PUBLIC_API_PATH}/changes?cursor=…&limit=1000\` lists every change after the cursor, oldest first, each record once in its latest state: \`{ "seq", "type", "op", "id", "object", "changed_at" }\`. Apply an \`upsert\` by replacing your copy of the record with \`object\`, a \`delete\` (\`object\` is null: deleted, made inactive, or vendor support) by removing it. Follow \`next_cursor\` until \`has_more\` is false, keep the last \`next_cursor\`, and poll from it later.

${fence(
  'sh',
  `
api="${publicApi}"
curl -s "$api/exports/incidents.ndjson" ${KEY_HEADER} -D headers.txt -o incidents.ndjson
cursor=$(grep -i '^x-changes-cursor:' headers.txt | cut -d' ' -f2 | tr -d '\\r')
curl -s "$api/changes?limit=1000&cursor=$cursor" ${KEY_HEADER}`,
)}

Without a cursor the feed starts from the beginning (a full sync); \`cursor=latest\` answers no changes and the current position. A walk never skips a change. Cursors are opaque: one garbled, altered or another account's is 400 \`INVALID_CURSOR\`; one older than the feed keeps deletions (\`CHANGES_RETENTION_DAYS\`, 400 days unless the operator set another) is 410 \`CURSOR_EXPIRED\`: export again and continue from the new \`X-Changes-Cursor\`. A client that polls within the retention never sees 410.

The SDK's \`sync()\` does both steps and hands you each record and deletion, saving the cursor after every page:

${fence(
  'ts',
  `
import { readFile, writeFile } from 'node:fs/promises';
import { createClient } from '@safety-incident/sdk';

${sdkClient(baseUrl)}
await client.sync({
  cursor: await readFile('cursor.txt', 'utf8').catch(() => null), // null: start with the exports
  onRecord: ({ type, object }) => console.log('upsert', type, object.id),
  onDelete: ({ type, id }) => console.log('delete', type, id),
  saveCursor: (cursor) => writeFile('cursor.txt', cursor),
});`,
)}

## Webhooks and verifying them

Instead of polling \`/changes\`, have the changes pushed: a Super Admin registers an HTTPS endpoint (admin panel, Settings › Integrations › Webhooks, or \`safety-api webhooks create\`), and the service sends it one \`POST\` per change, in feed order, at least once. The events are \`incident.created\`, \`incident.updated\` and \`incident.deleted\`, the same for \`user\`, \`department\` and \`location\`, and \`webhook.test\`; the Webhooks section below has each one's body. \`data.object\` is the record as the lists show it (null when deleted), and \`data.cursor\` a \`/changes\` cursor just after the event: a receiver that lost events pulls the feed from the last one it stored.

Every request is signed (Standard Webhooks). Before trusting one:

1. Read the headers \`webhook-id\`, \`webhook-timestamp\` and \`webhook-signature\`, and the raw body as it arrived, before any JSON parsing.
2. Refuse a \`webhook-timestamp\` (Unix seconds) more than five minutes from your clock: it stops replays.
3. Compute the HMAC-SHA256 of \`{webhook-id}.{webhook-timestamp}.{body}\`, keyed with the base64-decoded part of the endpoint's secret after \`whsec_\`, and encode it in base64.
4. \`webhook-signature\` holds \`v1,<base64>\` signatures separated by spaces (one per secret still valid after a rotation): accept the request if any of them equals yours, compared in constant time.

Answer with a 2xx within 10 seconds (the operator's \`WEBHOOK_TIMEOUT_MS\`) and do slow work afterwards. Any other answer, or none, is retried with backoff (about 5 s, 5 min, 30 min, 2 h, 5 h and 10 h, then every 10 h) while later events wait, so order holds; 410 disables the endpoint, and so do 72 hours of failures (\`WEBHOOK_DISABLE_AFTER_HOURS\`). \`webhook-id\` is the same on every retry of an event: drop the ones you already handled.

The SDK's \`verifyWebhook\` does all four steps (the Python client's \`verify_webhook\` too) and returns the typed event:

${fence(
  'ts',
  `
import { createServer } from 'node:http';
import { verifyWebhook, WebhookVerificationError } from '@safety-incident/sdk';

const secret = process.env.WEBHOOK_SECRET ?? ''; // whsec_…, shown once when the endpoint was created
createServer(async (req, res) => {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk);
  try {
    const event = verifyWebhook(Buffer.concat(chunks), req.headers, secret);
    console.log(event.type, event.data.id, event.data.cursor); // apply it, then answer
    res.writeHead(204).end();
  } catch (error) {
    res.writeHead(error instanceof WebhookVerificationError ? 400 : 500).end();
  }
}).listen(3000);`,
)}`;
}
