import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { webhookRepository } from '../../src/db/repositories/webhooks.ts';
import {
  type CliResult,
  createTestContext,
  runCli,
  STORES,
  seedAccount,
  seedIncidents,
  type TestContext,
} from '../helpers.ts';

const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;

/** One request a local receiver got. */
interface Hit {
  method: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A real HTTP receiver on 127.0.0.1 that answers every request with `status`. */
async function startReceiver(status: number): Promise<{ url: string; hits: Hit[]; close(): Promise<void> }> {
  const hits: Hit[] = [];
  const server: Server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => {
      body += chunk;
    });
    request.on('end', () => {
      hits.push({ method: request.method ?? '', headers: request.headers, body });
      response.statusCode = status;
      response.end(status >= 300 ? 'receiver is broken' : undefined);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks/safety`,
    hits,
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close').catch(() => {});
    },
  };
}

/** The webhook headers of a received request, as `standardwebhooks` takes them. */
function signatureHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const pick = (name: string) => {
    const value = headers[name];
    assert.equal(typeof value, 'string', `header ${name}`);
    return value as string;
  };
  return {
    'webhook-id': pick('webhook-id'),
    'webhook-timestamp': pick('webhook-timestamp'),
    'webhook-signature': pick('webhook-signature'),
  };
}

/** A failure the way every command must fail: non-zero, one line on stderr, nothing on stdout. */
function assertOneLineFailure(result: CliResult, expected: RegExp, label: string): void {
  assert.notEqual(result.code, 0, `${label}: exit code`);
  assert.match(result.stderr, /^safety-api: [^\n]+\n$/, `${label}: one line on stderr`);
  assert.match(result.stderr, expected, label);
  assert.equal(result.stdout, '', `${label}: nothing on stdout`);
}

for (const store of STORES) {
  describe(`safety-api webhooks (${store})`, () => {
    let ctx: TestContext;
    let accountId: string;
    let env: Record<string, string>;
    let ok: Awaited<ReturnType<typeof startReceiver>>;
    let broken: Awaited<ReturnType<typeof startReceiver>>;

    before(async () => {
      // Private receivers for the service too: a test fills an account through it.
      ctx = await createTestContext(store, { WEBHOOKS_ALLOW_PRIVATE: 'true' });
      accountId = await seedAccount(ctx.db);
      env = { DATABASE_URL: ctx.databaseUrl, WEBHOOKS_ALLOW_PRIVATE: 'true' };
      [ok, broken] = await Promise.all([startReceiver(204), startReceiver(500)]);
    });
    after(async () => {
      await Promise.all([ok.close(), broken.close()]);
      await ctx.close();
    });

    const cli = (args: string[], extra: Record<string, string> = {}) => runCli(args, { ...env, ...extra });

    const createJson = async (args: string[], account = accountId) => {
      const result = await cli(['webhooks', 'create', '--account', account, ...args, '--json']);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.stderr, '');
      return JSON.parse(result.stdout) as {
        id: string;
        url: string;
        events: string[];
        state: string;
        secret: string;
        [field: string]: unknown;
      };
    };

    const showJson = async (id: string) => {
      const result = await cli(['webhooks', 'show', id, '--json']);
      assert.equal(result.code, 0, result.stderr);
      return JSON.parse(result.stdout) as Record<string, unknown> & {
        attempts: Record<string, unknown>[];
      };
    };

    const endpointCount = async () =>
      (await ctx.db.selectFrom('webhook_endpoints').select('id').execute()).length;

    const auditOf = (id: string) =>
      ctx.db
        .selectFrom('audit_events')
        .select(['subject_type', 'actor', 'action'])
        .where('subject_id', '=', id)
        .orderBy('id')
        .execute();

    const storedRow = (id: string) =>
      ctx.db.selectFrom('webhook_endpoints').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

    test('create, list, show, disable, enable and delete: JSON output, stored state and audit events', async () => {
      const all = await createJson(['--url', ok.url]);
      assert.match(all.id, /^[0-9a-f-]{36}$/);
      assert.equal(all.url, ok.url);
      assert.deepEqual(all.events, ['*']);
      assert.equal(all.state, 'active');
      assert.match(all.secret, SECRET);
      // Only sealed: the raw secret is nowhere in the stored row.
      assert.ok(!JSON.stringify(await storedRow(all.id)).includes(all.secret.slice(6)));

      const some = await createJson([
        '--url',
        ok.url,
        '--events',
        'incident.*,user.deleted',
        '--description',
        'BI export',
      ]);
      assert.deepEqual(some.events, ['incident.*', 'user.deleted']);
      assert.notEqual(some.secret, all.secret);
      const stored = await ctx.runtime.services.webhooks.show(some.id);
      assert.deepEqual(stored.events, ['incident.*', 'user.deleted']);
      assert.equal(stored.state, 'active');
      assert.equal(stored.description, 'BI export');
      assert.equal(stored.account_id, accountId);

      const listed = await cli(['webhooks', 'list', '--account', accountId, '--json']);
      assert.equal(listed.code, 0, listed.stderr);
      assert.ok(!listed.stdout.includes('whsec_'), 'list never prints a secret');
      const entries = JSON.parse(listed.stdout) as Record<string, unknown>[];
      assert.deepEqual(entries.map((e) => e.id).sort(), [all.id, some.id].sort());
      for (const created of [all, some]) {
        const entry = entries.find((e) => e.id === created.id) as Record<string, unknown>;
        assert.equal(entry.secret, undefined);
        assert.equal(entry.url, created.url);
        assert.deepEqual(entry.events, created.events);
        assert.equal(entry.state, 'active');
        assert.equal(typeof entry.cursor, 'string');
        assert.ok((entry.cursor as string).length > 0);
        assert.equal(entry.lag, 0);
        assert.equal(entry.last_attempt_at, null);
        assert.equal(entry.last_status, null);
        assert.equal(entry.disabled_reason, null);
      }

      const shown = await showJson(some.id);
      assert.equal(shown.secret, undefined);
      assert.equal(shown.id, some.id);
      assert.equal(shown.url, some.url);
      assert.deepEqual(shown.events, some.events);
      assert.equal(shown.state, 'active');
      assert.equal(typeof shown.cursor, 'string');
      assert.equal(shown.lag, 0);
      assert.equal(shown.last_attempt_at, null);
      assert.equal(shown.last_status, null);
      assert.equal(shown.disabled_reason, null);
      assert.deepEqual(shown.attempts, []);

      const disabled = await cli(['webhooks', 'disable', some.id]);
      assert.equal(disabled.code, 0, disabled.stderr);
      assert.match(disabled.stdout, new RegExp(`^${some.id}  disabled  `));
      const afterDisable = await ctx.runtime.services.webhooks.show(some.id);
      assert.equal(afterDisable.state, 'disabled');
      assert.equal(typeof afterDisable.disabled_reason, 'string');

      const enabled = await cli(['webhooks', 'enable', some.id]);
      assert.equal(enabled.code, 0, enabled.stderr);
      const afterEnable = await ctx.runtime.services.webhooks.show(some.id);
      assert.equal(afterEnable.state, 'active');
      assert.equal(afterEnable.disabled_reason, null);

      assertOneLineFailure(
        await cli(['webhooks', 'enable', some.id]),
        /already active/,
        'enable of an active endpoint',
      );
      assert.equal((await ctx.runtime.services.webhooks.show(some.id)).state, 'active');

      const deleted = await cli(['webhooks', 'delete', some.id]);
      assert.equal(deleted.code, 0, deleted.stderr);
      await assert.rejects(ctx.runtime.services.webhooks.show(some.id), /no webhook endpoint/);
      assertOneLineFailure(
        await cli(['webhooks', 'show', some.id, '--json']),
        new RegExp(`^safety-api: no webhook endpoint with id "${some.id}"\\n$`),
        'show after delete',
      );
      const remaining = await ctx.runtime.services.webhooks.list(accountId);
      assert.deepEqual(
        remaining.map((e) => e.id),
        [all.id],
      );

      const events = await auditOf(some.id);
      assert.deepEqual(
        events.map((e) => e.action),
        ['created', 'disabled', 'enabled', 'deleted'],
      );
      assert.ok(events.every((e) => e.actor === 'cli' && e.subject_type === 'webhook_endpoint'));
    });

    test('text output: create prints the secret once, list and show never print it', async () => {
      const created = await cli(['webhooks', 'create', '--account', accountId, '--url', `${ok.url}/text`]);
      assert.equal(created.code, 0, created.stderr);
      const secrets = created.stdout.match(/whsec_[A-Za-z0-9+/=]+/g) ?? [];
      assert.equal(secrets.length, 1, created.stdout);
      const secret = secrets[0] as string;
      assert.match(secret, SECRET);
      assert.match(created.stdout, /^Created [0-9a-f-]{36} {2}active {2}/);
      const id = (/^Created ([0-9a-f-]{36})/.exec(created.stdout) as RegExpExecArray)[1] as string;

      const [listed, shown] = await Promise.all([
        cli(['webhooks', 'list', '--account', accountId]),
        cli(['webhooks', 'show', id]),
      ]);
      assert.equal(listed.code, 0, listed.stderr);
      assert.ok(listed.stdout.includes(id));
      assert.ok(!listed.stdout.includes('whsec_'), 'list never prints a secret');
      assert.equal(shown.code, 0, shown.stderr);
      assert.ok(!shown.stdout.includes('whsec_'), 'show never prints a secret');

      // The printed secret is the one that signs.
      const hits = ok.hits.length;
      const sent = await cli(['webhooks', 'test', id]);
      assert.equal(sent.code, 0, sent.stderr);
      const hit = ok.hits[hits] as Hit;
      assert.doesNotThrow(() => new Webhook(secret).verify(hit.body, signatureHeaders(hit.headers)));
    });

    test('rotate-secret prints a new secret; a bad --overlap-hours changes nothing', async () => {
      const created = await createJson(['--url', `${ok.url}/rotate`]);

      const rotated = await cli(['webhooks', 'rotate-secret', created.id, '--json']);
      assert.equal(rotated.code, 0, rotated.stderr);
      const first = JSON.parse(rotated.stdout) as Record<string, unknown>;
      assert.deepEqual(Object.keys(first), ['secret']);
      assert.match(first.secret as string, SECRET);
      assert.notEqual(first.secret, created.secret);
      // The default overlap: the previous secret signs for a while longer.
      assert.notEqual(
        (await ctx.runtime.services.webhooks.show(created.id)).previous_secret_expires_at,
        null,
      );

      const now = await cli(['webhooks', 'rotate-secret', created.id, '--overlap-hours', '0', '--json']);
      assert.equal(now.code, 0, now.stderr);
      const second = JSON.parse(now.stdout) as { secret: string };
      assert.match(second.secret, SECRET);
      assert.notEqual(second.secret, first.secret);
      assert.notEqual(second.secret, created.secret);
      assert.equal((await ctx.runtime.services.webhooks.show(created.id)).previous_secret_expires_at, null);

      const rowBefore = await storedRow(created.id);
      const auditBefore = (await auditOf(created.id)).length;
      const bad: [string[], RegExp][] = [
        [['--overlap-hours', '-1'], /overlap/],
        [['--overlap-hours=-1'], /overlap must be a number of hours/],
        [['--overlap-hours', 'abc'], /overlap must be a number of hours from 0 to \d+ \(got "abc"\)/],
      ];
      const results = await Promise.all(
        bad.map(([args]) => cli(['webhooks', 'rotate-secret', created.id, ...args, '--json'])),
      );
      bad.forEach(([args, expected], i) =>
        assertOneLineFailure(results[i] as CliResult, expected, `rotate-secret ${args.join(' ')}`),
      );
      assert.deepEqual(await storedRow(created.id), rowBefore);
      assert.equal((await auditOf(created.id)).length, auditBefore);

      // With no overlap only the newest secret signs.
      const hits = ok.hits.length;
      assert.equal((await cli(['webhooks', 'test', created.id])).code, 0);
      const hit = ok.hits[hits] as Hit;
      const headers = signatureHeaders(hit.headers);
      assert.doesNotThrow(() => new Webhook(second.secret).verify(hit.body, headers));
      assert.throws(() => new Webhook(first.secret as string).verify(hit.body, headers));
      assert.throws(() => new Webhook(created.secret).verify(hit.body, headers));

      const events = await auditOf(created.id);
      assert.deepEqual(
        events.map((e) => e.action),
        ['created', 'secret rotated', 'secret rotated'],
      );
      assert.ok(events.every((e) => e.actor === 'cli' && e.subject_type === 'webhook_endpoint'));
    });

    test('test sends a signed webhook.test; a failing receiver makes it exit non-zero; both are logged', async () => {
      const good = await createJson(['--url', ok.url, '--events', 'user.deleted']);
      const bad = await createJson(['--url', broken.url]);
      const [okHits, brokenHits] = [ok.hits.length, broken.hits.length];

      const sent = await cli(['webhooks', 'test', good.id]);
      assert.equal(sent.code, 0, sent.stderr);
      assert.equal(sent.stderr, '');
      assert.match(sent.stdout, /HTTP 204/);
      assert.equal(ok.hits.length, okHits + 1);
      const hit = ok.hits[okHits] as Hit;
      assert.equal(hit.method, 'POST');
      assert.equal(hit.headers['content-type'], 'application/json');
      const headers = signatureHeaders(hit.headers);
      assert.match(headers['webhook-timestamp'] as string, /^\d+$/);
      assert.ok(Math.abs(Number(headers['webhook-timestamp']) - Date.now() / 1000) < 60);
      assert.match(headers['webhook-signature'] as string, /^v1,[A-Za-z0-9+/]{43}=$/);
      const payload = new Webhook(good.secret).verify(hit.body, headers) as {
        type: string;
        timestamp: string;
        data: Record<string, unknown>;
      };
      assert.equal(payload.type, 'webhook.test', 'sent whatever the filter');
      assert.equal(JSON.parse(hit.body).type, 'webhook.test');
      assert.throws(() => new Webhook(bad.secret).verify(hit.body, headers), 'another secret fails');

      const failed = await cli(['webhooks', 'test', bad.id]);
      assertOneLineFailure(failed, /fail.*500|500.*fail/, 'test against a receiver answering 500');
      assert.equal(broken.hits.length, brokenHits + 1);

      const goodShown = await showJson(good.id);
      assert.equal(goodShown.attempts.length, 1);
      const [goodAttempt] = goodShown.attempts as Record<string, unknown>[];
      assert.equal(goodAttempt?.type, 'webhook.test');
      assert.equal(goodAttempt?.status, 204);
      assert.equal(goodAttempt?.error, null);
      assert.equal(goodAttempt?.webhook_id, headers['webhook-id']);
      assert.equal(typeof goodAttempt?.at, 'string');
      assert.equal(typeof goodAttempt?.duration_ms, 'number');

      // A second test to the broken receiver: attempts are listed newest first.
      assertOneLineFailure(
        await cli(['webhooks', 'test', bad.id]),
        /500/,
        'a second test to the broken receiver',
      );
      const badShown = await showJson(bad.id);
      assert.equal(badShown.attempts.length, 2);
      for (const attempt of badShown.attempts) {
        assert.equal(attempt.type, 'webhook.test');
        assert.equal(attempt.status, 500);
        assert.match(attempt.error as string, /500/);
      }
      const [newest, oldest] = badShown.attempts as { at: string; webhook_id: string }[];
      assert.ok((newest as { at: string }).at >= (oldest as { at: string }).at);
      assert.equal(
        (oldest as { webhook_id: string }).webhook_id,
        (broken.hits[brokenHits] as Hit).headers['webhook-id'],
      );
      assert.equal(
        (newest as { webhook_id: string }).webhook_id,
        (broken.hits[brokenHits + 1] as Hit).headers['webhook-id'],
      );

      // Nobody listening: non-zero, one line.
      const gone = await startReceiver(204);
      const goneUrl = gone.url;
      await gone.close();
      const unreachable = await createJson(['--url', goneUrl]);
      assertOneLineFailure(
        await cli(['webhooks', 'test', unreachable.id]),
        /fail/,
        'test against nothing listening',
      );
      const unreachableShown = await showJson(unreachable.id);
      assert.equal(unreachableShown.attempts[0]?.status, null);
    });

    test('resend moves the position to the head or to an earlier cursor; a garbled cursor changes nothing', async () => {
      const account = await seedAccount(ctx.db);
      await seedIncidents(ctx.db, account, 3);
      const created = await createJson(['--url', ok.url], account);
      const start = await showJson(created.id);
      assert.equal(start.position, 3, 'a new endpoint starts at the head');
      assert.equal(start.lag, 0);
      const startCursor = start.cursor as string;

      await seedIncidents(ctx.db, account, 4);
      const behind = await ctx.runtime.services.webhooks.show(created.id);
      assert.equal(behind.position, 3);
      assert.equal(behind.lag, 4);

      const latest = await cli(['webhooks', 'resend', created.id, '--cursor', 'latest']);
      assert.equal(latest.code, 0, latest.stderr);
      const atHead = await ctx.runtime.services.webhooks.show(created.id);
      assert.equal(atHead.position, 7);
      assert.equal(atHead.lag, 0);

      const other = await createJson(['--url', `${ok.url}/other`]);
      const otherCursor = (await showJson(other.id)).cursor as string;
      const flipped = `${startCursor.slice(0, -1)}${startCursor.endsWith('A') ? 'B' : 'A'}`;
      const rowBefore = await storedRow(created.id);
      const auditBefore = (await auditOf(created.id)).length;
      const bad: [string[], RegExp][] = [
        [['--cursor', 'not-a-cursor'], /cursor/],
        [['--cursor', flipped], /cursor/],
        [['--cursor', otherCursor], /cursor/],
        [['--cursor', ''], /usage: safety-api webhooks resend/],
        [[], /usage: safety-api webhooks resend/],
      ];
      const results = await Promise.all(
        bad.map(([args]) => cli(['webhooks', 'resend', created.id, ...args])),
      );
      bad.forEach(([args, expected], i) =>
        assertOneLineFailure(results[i] as CliResult, expected, `resend ${args.join(' ')}`),
      );
      assert.deepEqual(await storedRow(created.id), rowBefore);
      assert.equal((await auditOf(created.id)).length, auditBefore);

      const replay = await cli(['webhooks', 'resend', created.id, '--cursor', startCursor]);
      assert.equal(replay.code, 0, replay.stderr);
      const replayed = await ctx.runtime.services.webhooks.show(created.id);
      assert.equal(replayed.position, 3);
      assert.equal(replayed.lag, 4);

      const events = await auditOf(created.id);
      assert.deepEqual(
        events.map((e) => e.action),
        ['created', 'resend', 'resend'],
      );
      assert.ok(events.every((e) => e.actor === 'cli' && e.subject_type === 'webhook_endpoint'));
    });

    type FailureCase = [args: string[], expected: RegExp, env?: Record<string, string>];

    /** Runs commands that must each fail with one line and, together, change no endpoint or audit event. */
    const assertFailWithoutChange = async (cases: FailureCase[]) => {
      const endpointsBefore = await ctx.db
        .selectFrom('webhook_endpoints')
        .selectAll()
        .orderBy('id')
        .execute();
      const auditBefore = (await ctx.db.selectFrom('audit_events').select('id').execute()).length;
      // Independent, and none of them writes: run a few at a time.
      const results: CliResult[] = [];
      for (let i = 0; i < cases.length; i += 4) {
        results.push(
          ...(await Promise.all(cases.slice(i, i + 4).map(([args, , extra]) => cli(args, extra)))),
        );
      }
      cases.forEach(([args, expected], i) =>
        assertOneLineFailure(results[i] as CliResult, expected, args.join(' ').slice(0, 120)),
      );
      assert.deepEqual(
        await ctx.db.selectFrom('webhook_endpoints').selectAll().orderBy('id').execute(),
        endpointsBefore,
      );
      assert.equal((await ctx.db.selectFrom('audit_events').select('id').execute()).length, auditBefore);
    };

    test('create refuses bad input with one line on standard error and creates nothing', async () => {
      const closed = await seedAccount(ctx.db, { api_access: 0 });
      const strict = { WEBHOOKS_ALLOW_PRIVATE: 'false' };
      const create = (url: string, ...more: string[]) => [
        'webhooks',
        'create',
        '--account',
        accountId,
        '--url',
        url,
        ...more,
      ];
      const endpointsBefore = await endpointCount();
      await assertFailWithoutChange([
        [
          ['webhooks', 'create', '--account', accountId],
          /^safety-api: webhooks create needs --account ID and --url URL\n$/,
        ],
        [['webhooks', 'create', '--url', ok.url], /^safety-api: webhooks create needs --account ID/],
        [
          ['webhooks', 'create', '--account', 'nope', '--url', ok.url],
          /^safety-api: no account with id "nope"\n$/,
        ],
        [['webhooks', 'create', '--account', closed, '--url', ok.url], /does not include API access/],
        [create('not a url'), /url must be an absolute https:\/\/ URL \(got "not a url"\)/],
        [create('http://hooks.example.com/x'), /url must start with https:\/\//, strict],
        [create('https://127.0.0.1/x'), /url refused: 127\.0\.0\.1 \(loopback\)/, strict],
        [create('https://[::1]/x'), /url refused: .*loopback/, strict],
        [create('https://169.254.169.254/latest'), /url refused: 169\.254\.169\.254 \(link-local\)/, strict],
        [create('https://10.0.0.1/x'), /url refused: 10\.0\.0\.1 \(RFC 1918 private\)/, strict],
        [create('https://localhost/x'), /url refused: "localhost" resolves to/, strict],
        [create(ok.url.replace('http://', 'http://user:pw@')), /must not carry credentials/],
        [create(ok.url, '--events', 'incident.exploded'), /unknown event type "incident\.exploded"/],
        [create(ok.url, '--description', 'x'.repeat(201)), /description must be at most 200 characters/],
      ]);
      assert.equal(await endpointCount(), endpointsBefore);
    });

    test('update edits URL, events and description; prints the endpoint like show; keeps secret and position; audited', async () => {
      const account = await seedAccount(ctx.db);
      const created = await createJson(['--url', `${broken.url}/old`, '--description', 'Before'], account);
      await seedIncidents(ctx.db, account, 2);
      const before = await storedRow(created.id);

      const updated = await cli([
        'webhooks',
        'update',
        created.id,
        '--url',
        `${ok.url}/new`,
        '--events',
        'user.*,incident.*',
        '--description',
        '',
        '--json',
      ]);
      assert.equal(updated.code, 0, updated.stderr);
      assert.equal(updated.stderr, '');
      assert.ok(!updated.stdout.includes('whsec_'), 'never a secret');
      const printed = JSON.parse(updated.stdout) as Record<string, unknown>;
      const shown = await showJson(created.id);
      assert.deepEqual(Object.keys(printed).sort(), Object.keys(shown).sort(), 'the fields of show --json');
      assert.equal(printed.url, `${ok.url}/new`);
      assert.deepEqual(printed.events, ['incident.*', 'user.*']);
      assert.equal(printed.description, null);
      assert.equal(printed.position, before.position);
      assert.equal(printed.lag, 2);
      const after = await storedRow(created.id);
      assert.deepEqual(
        [after.secret, after.position, after.known_through, after.state],
        [before.secret, before.position, before.known_through, before.state],
      );

      const text = await cli(['webhooks', 'update', created.id, '--description', 'After']);
      assert.equal(text.code, 0, text.stderr);
      assert.match(
        text.stdout,
        new RegExp(`^Updated ${created.id} {2}active {2}${ok.url}/new {2}incident\\.\\*,user\\.\\*`),
      );

      // The secret shown at creation still signs, at the new URL.
      const hits = ok.hits.length;
      assert.equal((await cli(['webhooks', 'test', created.id])).code, 0);
      const hit = ok.hits[hits] as Hit;
      assert.doesNotThrow(() => new Webhook(created.secret).verify(hit.body, signatureHeaders(hit.headers)));

      const events = await ctx.db
        .selectFrom('audit_events')
        .select(['actor', 'action', 'detail'])
        .where('subject_id', '=', created.id)
        .orderBy('id')
        .execute();
      assert.deepEqual(events.slice(1), [
        {
          actor: 'cli',
          action: 'updated',
          detail: `url ${broken.url}/old → ${ok.url}/new; events * → incident.*,user.*; description "Before" → none`,
        },
        { actor: 'cli', action: 'updated', detail: 'description none → "After"' },
      ]);
    });

    test('update refuses bad input, a private URL and another endpoint’s URL and filter with one line, and changes nothing', async () => {
      const account = await seedAccount(ctx.db);
      const first = await createJson(['--url', `${ok.url}/first`], account);
      const second = await createJson(['--url', `${ok.url}/second`], account);
      const strict = { WEBHOOKS_ALLOW_PRIVATE: 'false' };
      const update = (...more: string[]) => ['webhooks', 'update', second.id, ...more];
      await assertFailWithoutChange([
        [['webhooks', 'update'], /^safety-api: usage: safety-api webhooks update ENDPOINT_ID/],
        [update(), /^safety-api: nothing to change: give --url, --events or --description/],
        [['webhooks', 'update', randomUUID(), '--description', 'x'], /no webhook endpoint with id/],
        [update('--url', 'not a url'), /url must be an absolute https:\/\/ URL \(got "not a url"\)/],
        [update('--url', 'https://127.0.0.1/x'), /url refused: 127\.0\.0\.1 \(loopback\)/, strict],
        [update('--url', 'https://10.0.0.1/x'), /url refused: 10\.0\.0\.1 \(RFC 1918 private\)/, strict],
        [update('--url', `${ok.url}/third`), /url must start with https:\/\//, strict],
        [update('--events', 'incident.exploded'), /unknown event type "incident\.exploded"/],
        [update('--description', 'x'.repeat(201)), /description must be at most 200 characters/],
        [
          update('--url', `${ok.url}/second`, '--events', '*'),
          /nothing to change: the endpoint already has this URL/,
        ],
        [
          update('--url', `${ok.url}/first`),
          new RegExp(
            `^safety-api: the account already has a webhook endpoint for this URL and these events \\(${first.id}\\): edit or delete that one instead\n$`,
          ),
        ],
      ]);
    });

    test('create refuses the endpoint past WEBHOOK_MAX_ENDPOINTS and a second one for a URL and filter', async () => {
      const account = await seedAccount(ctx.db);
      // The default cap (WEBHOOK_MAX_ENDPOINTS unset), filled without a process per endpoint.
      for (let i = 0; i < 20; i += 1)
        await ctx.runtime.services.webhooks.create({
          accountId: account,
          url: `${ok.url}/${i}`,
          actor: 'test',
        });
      const create = (url: string, ...more: string[]) => [
        'webhooks',
        'create',
        '--account',
        account,
        '--url',
        url,
        ...more,
      ];
      await assertFailWithoutChange([
        [
          create(`${ok.url}/20`),
          /^safety-api: the account already has 20 webhook endpoints, the most it may have \(WEBHOOK_MAX_ENDPOINTS=20\): delete one before adding another\n$/,
        ],
      ]);
      // Room again, but not for a second endpoint with a URL and filter already there.
      await ctx.runtime.services.webhooks.delete(
        (await ctx.runtime.services.webhooks.list(account))[0]?.id ?? '',
        'test',
      );
      await assertFailWithoutChange([
        [
          create(`${ok.url}/1`, '--events', '*'),
          /^safety-api: the account already has a webhook endpoint for this URL and these events \([0-9a-f-]{36}\): edit or delete that one instead\n$/,
        ],
      ]);
      const added = await createJson(['--url', `${ok.url}/20`], account);
      assert.equal(added.state, 'active');
      assert.equal((await ctx.runtime.services.webhooks.list(account)).length, 20);
    });

    test('show filters the log by --outcome and --type, and --json gives each request and response; never a secret', async () => {
      const created = await createJson(['--url', `${ok.url}/log`]);
      const tested = await cli(['webhooks', 'test', created.id]);
      assert.equal(tested.code, 0, tested.stderr);
      const hit = ok.hits.at(-1) as Hit;
      const at = new Date().toISOString();
      const seeded = (i: number, type: string, status: number | null, outcome: string) => ({
        endpoint_id: created.id,
        webhook_id: `msg_cli_${i}`,
        type,
        seq: i,
        at,
        status,
        duration_ms: 7,
        error: status === null ? 'no answer within 10000 ms' : status >= 300 ? `HTTP ${status}` : null,
        outcome,
      });
      await webhookRepository.recordAttempts(ctx.db, [
        seeded(1, 'incident.created', 204, 'success'),
        seeded(2, 'incident.updated', null, 'timeout'),
        seeded(3, 'user.created', 500, 'http_error'),
      ]);

      const all = await showJson(created.id);
      assert.deepEqual(
        all.attempts.map((a) => a.webhook_id),
        ['msg_cli_3', 'msg_cli_2', 'msg_cli_1', hit.headers['webhook-id']],
      );
      const test = all.attempts[3] as {
        request: { headers: Record<string, string>; body: string };
        response: { status: number; headers: Record<string, string>; body: string };
        outcome: string;
      };
      assert.equal(test.outcome, 'success');
      assert.equal(test.request.body, hit.body);
      assert.equal(test.request.headers['webhook-signature'], hit.headers['webhook-signature']);
      assert.equal(test.request.headers['webhook-timestamp'], hit.headers['webhook-timestamp']);
      assert.equal(test.response.status, 204);
      assert.equal(typeof test.response.headers.date, 'string');
      assert.equal(test.response.body, '');

      const filtered = async (...args: string[]) => {
        const result = await cli(['webhooks', 'show', created.id, ...args]);
        assert.equal(result.code, 0, result.stderr);
        return result.stdout;
      };
      const [failures, timeouts, incidents, both, limited, text] = await Promise.all([
        filtered('--outcome', 'failure', '--json'),
        filtered('--outcome', 'timeout', '--json'),
        filtered('--type', 'incident.*', '--json'),
        filtered('--type', 'incident.*,webhook.test', '--outcome', 'success', '--json'),
        filtered('--limit', '1', '--json'),
        filtered('--outcome', 'failure'),
      ]);
      const ids = (out: string) =>
        (JSON.parse(out) as { attempts: { webhook_id: string }[] }).attempts.map((a) => a.webhook_id);
      assert.deepEqual(ids(failures), ['msg_cli_3', 'msg_cli_2']);
      assert.deepEqual(ids(timeouts), ['msg_cli_2']);
      assert.deepEqual(ids(incidents), ['msg_cli_2', 'msg_cli_1']);
      assert.deepEqual(ids(both), ['msg_cli_1', hit.headers['webhook-id']]);
      assert.deepEqual(ids(limited), ['msg_cli_3']);
      assert.deepEqual(
        text
          .split('\n')
          .filter((line) => line.startsWith('  '))
          .map((line) => line.trim().split('  ')[1]),
        ['msg_cli_3', 'msg_cli_2'],
      );
      const key = created.secret.slice('whsec_'.length);
      for (const out of [JSON.stringify(all), failures, incidents, both, text])
        assert.ok(!out.includes(key) && !out.includes('whsec_'), 'never a secret');
    });

    test('redeliver sends a logged event again with its webhook-id and a new signature; skip passes the event an endpoint is stuck on; both audited', async () => {
      const account = await seedAccount(ctx.db);
      const created = await createJson(['--url', `${ok.url}/again`], account);
      assert.equal((await cli(['webhooks', 'test', created.id])).code, 0);
      const first = ok.hits.at(-1) as Hit;
      const webhookId = signatureHeaders(first.headers)['webhook-id'] as string;

      const again = await cli(['webhooks', 'redeliver', created.id, webhookId]);
      assert.equal(again.code, 0, again.stderr);
      assert.equal(again.stderr, '');
      assert.match(
        again.stdout,
        new RegExp(`^Redelivered ${webhookId} \\(webhook\\.test\\): HTTP 204 in \\d+ ms\\.\n$`),
      );
      const hit = ok.hits.at(-1) as Hit;
      assert.notEqual(hit, first);
      const headers = signatureHeaders(hit.headers);
      assert.equal(headers['webhook-id'], webhookId, 'the same webhook-id');
      assert.equal(hit.body, first.body, 'the same body');
      assert.deepEqual(new Webhook(created.secret).verify(hit.body, headers), JSON.parse(first.body));
      assert.ok(!again.stdout.includes(created.secret.slice('whsec_'.length)));

      // Stuck: two changes after the endpoint's position, the first failing.
      await seedIncidents(ctx.db, account, 2);
      const failingSince = new Date(Date.now() - 60_000).toISOString();
      await webhookRepository.update(ctx.db, created.id, {
        failing_since: failingSince,
        failed_attempts: 3,
        next_attempt_at: new Date(Date.now() + 3_600_000).toISOString(),
        updated_at: new Date().toISOString(),
      });
      const before = await storedRow(created.id);
      const skipped = await cli(['webhooks', 'skip', created.id]);
      assert.equal(skipped.code, 0, skipped.stderr);
      assert.match(
        skipped.stdout,
        new RegExp(
          `^Skipped msg_\\S+ \\(incident\\.(created|updated) \\S+, seq ${before.position + 1}\\); the next event is sent at once\\.\n`,
        ),
      );
      const after = await storedRow(created.id);
      assert.equal(after.position, before.position + 1, 'just past the event it was stuck on');
      assert.equal(after.failing_since, null);
      assert.equal(after.failed_attempts, 0);
      assert.equal(after.next_attempt_at, null);
      assert.equal(after.lease_owner, null);

      const events = await ctx.db
        .selectFrom('audit_events')
        .select(['actor', 'action', 'detail'])
        .where('subject_id', '=', created.id)
        .orderBy('id')
        .execute();
      assert.deepEqual(
        events.map((e) => [e.actor, e.action]),
        [
          ['cli', 'created'],
          ['cli', 'redelivered'],
          ['cli', 'skipped'],
        ],
      );
      assert.match(events[1]?.detail ?? '', new RegExp(`^${webhookId} \\(webhook\\.test\\): HTTP 204$`));
      assert.match(
        events[2]?.detail ?? '',
        new RegExp(`seq ${before.position + 1}\\); failing since ${failingSince}$`),
      );
    });

    test('redeliver, skip and show refuse bad input with one line and change nothing', async () => {
      const created = await createJson(['--url', `${ok.url}/refused`]);
      assert.equal((await cli(['webhooks', 'test', created.id])).code, 0);
      const missing = randomUUID();
      const attempts = async () =>
        (await ctx.db.selectFrom('webhook_attempts').select('id').execute()).length;
      const attemptsBefore = await attempts();
      const hits = ok.hits.length;
      await assertFailWithoutChange([
        [
          ['webhooks', 'redeliver', created.id],
          /^safety-api: usage: safety-api webhooks redeliver ENDPOINT_ID WEBHOOK_ID\n$/,
        ],
        [['webhooks', 'redeliver'], /usage: safety-api webhooks redeliver/],
        [
          ['webhooks', 'redeliver', missing, 'msg_x'],
          new RegExp(`^safety-api: no webhook endpoint with id "${missing}"\\n$`),
        ],
        [
          ['webhooks', 'redeliver', created.id, 'msg_never_sent'],
          /^safety-api: the delivery log of webhook endpoint "[0-9a-f-]+" holds no event with webhook id "msg_never_sent"/,
        ],
        [['webhooks', 'skip'], /^safety-api: usage: safety-api webhooks skip ENDPOINT_ID\n$/],
        [['webhooks', 'skip', missing], /no webhook endpoint with id/],
        [
          ['webhooks', 'skip', created.id],
          /^safety-api: the webhook endpoint "[0-9a-f-]+" is not stuck on an event: its deliveries are not failing\n$/,
        ],
        [
          ['webhooks', 'show', created.id, '--outcome', 'sometimes'],
          /^safety-api: outcome must be one of success, failure,/,
        ],
        [
          ['webhooks', 'show', created.id, '--type', 'incident.exploded'],
          /^safety-api: unknown event type "incident\.exploded"/,
        ],
        [
          ['webhooks', 'show', created.id, '--limit', '1001'],
          /^safety-api: limit must be a whole number from 1 to 1000/,
        ],
        [['webhooks', 'show', created.id, '--limit', 'many'], /^safety-api: limit must be a whole number/],
      ]);
      assert.equal(await attempts(), attemptsBefore, 'nothing logged');
      assert.equal(ok.hits.length, hits, 'nothing sent');
    });

    test('commands on a missing endpoint, or in the wrong state, fail with one line and change nothing', async () => {
      const active = await createJson(['--url', `${ok.url}/active`]);
      const missing = randomUUID();
      await assertFailWithoutChange([
        [['webhooks', 'list'], /^safety-api: webhooks list needs --account ID\n$/],
        [['webhooks', 'list', '--account', 'nope'], /^safety-api: no account with id "nope"\n$/],
        [['webhooks', 'show'], /^safety-api: usage: safety-api webhooks show ENDPOINT_ID/],
        [
          ['webhooks', 'show', missing],
          new RegExp(`^safety-api: no webhook endpoint with id "${missing}"\\n$`),
        ],
        [['webhooks', 'disable', missing], /no webhook endpoint with id/],
        [['webhooks', 'enable', missing], /no webhook endpoint with id/],
        [['webhooks', 'delete', missing], /no webhook endpoint with id/],
        [['webhooks', 'test', missing], /no webhook endpoint with id/],
        [['webhooks', 'resend', missing, '--cursor', 'latest'], /no webhook endpoint with id/],
        [['webhooks', 'rotate-secret', missing], /no webhook endpoint with id/],
        [['webhooks', 'enable', active.id], /already active/],
        [['webhooks', 'explode'], /^safety-api: unknown webhooks action "explode"/],
      ]);
      assert.equal((await ctx.runtime.services.webhooks.show(active.id)).state, 'active');
    });
  });
}
