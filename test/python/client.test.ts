import assert from 'node:assert/strict';
import { execFile, spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { Webhook } from 'standardwebhooks';
import { OAUTH_PATH } from '../../src/paths.ts';
import { ROOT, STORES, createTestContext, outputOf, seedKey, type TestContext } from '../helpers.ts';
import { named, user } from '../records.ts';
import { account, gone, incident, minute } from '../import/files.ts';
import { seedClient } from '../oauth/harness.ts';
import { importRecords } from '../webhooks/feed.ts';
import { Receiver } from '../webhooks/receiver.ts';

/**
 * The Python client (packages/python) against the real server, on each store: installed offline
 * with pip from the repository, then its `unittest` suite (packages/python/tests) run with the
 * server's address and keys. What Python cannot do by itself, this file does for it through a
 * small control server on 127.0.0.1: the seeded data it should find, a change to the sync account
 * between two syncs, a webhook the server delivered, and a check of Python's signatures with the
 * `standardwebhooks` package.
 */

const run = promisify(execFile);
const PACKAGE = join(ROOT, 'packages/python');
// TEST_PYTHON: another interpreter (node-gyp reads PYTHON for its own use).
const PYTHON = process.env.TEST_PYTHON ?? 'python3';
const INCIDENTS = 450;
const SCOPES = 'incidents:read users:read departments:read locations:read';

/** The interpreter's major and minor version, or why there is none. */
function pythonVersion(): { version: [number, number] } | { missing: string } {
  const probe = spawnSync(PYTHON, ['-c', 'import sys; print(*sys.version_info[:2])'], { encoding: 'utf8' });
  if (probe.error !== undefined || probe.status !== 0)
    return { missing: `${PYTHON} not found (${probe.error?.message ?? probe.stderr.trim()})` };
  const [major = 0, minor = 0] = probe.stdout.trim().split(' ').map(Number);
  return { version: [major, minor] };
}

/** A client-credentials token of a new OAuth client of `accountId`, from the real token endpoint. */
async function accessToken(ctx: TestContext, accountId: string): Promise<string> {
  const { clientId, clientSecret } = await seedClient(ctx.db, accountId);
  const res = await ctx.app.inject({
    method: 'POST',
    url: `${OAUTH_PATH}/token`,
    headers: {
      authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded',
    },
    payload: new URLSearchParams({ grant_type: 'client_credentials', scope: SCOPES }).toString(),
  });
  assert.equal(res.statusCode, 200, res.body);
  const { access_token: token } = res.json<{ access_token: string }>();
  return token;
}

function portOf(server: { address(): ReturnType<Server['address']> }): number {
  const address = server.address();
  assert.ok(typeof address === 'object' && address !== null, 'listening on a TCP port');
  return address.port;
}

/** A JSON request body, read whole. */
async function jsonBody(request: IncomingMessage): Promise<unknown> {
  let text = '';
  request.setEncoding('utf8');
  for await (const chunk of request) text += String(chunk);
  return text === '' ? null : JSON.parse(text);
}

function reply(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify(body));
}

/** What Python sends to be checked with `standardwebhooks`. */
function isSignedWebhook(
  value: unknown,
): value is { body: string; headers: Record<string, string>; secret: string } {
  return (
    typeof value === 'object' &&
    value !== null &&
    'body' in value &&
    typeof value.body === 'string' &&
    'secret' in value &&
    typeof value.secret === 'string' &&
    'headers' in value &&
    typeof value.headers === 'object' &&
    value.headers !== null &&
    Object.values(value.headers).every((header) => typeof header === 'string')
  );
}

const python = pythonVersion();

if ('missing' in python) {
  test('the Python client (packages/python)', (t) => {
    t.skip(`python3 not found: the Python client's unittest suite did not run: ${python.missing}`);
  });
} else if (python.version[0] < 3 || (python.version[0] === 3 && python.version[1] < 10)) {
  test('the Python client (packages/python)', (t) => {
    t.skip(
      `${PYTHON} is ${python.version.join('.')}: the Python client needs 3.10 or later; its suite did not run`,
    );
  });
} else {
  // The install and each store's setup and suite run side by side: one after the other, they take
  // most of the time a test file may.
  describe('the Python client (packages/python)', { concurrency: true }, () => {
    const installed = mkdtempSync(join(tmpdir(), 'safety-python-'));
    let installation: Promise<{ stdout: string }>;
    before(() => {
      // --no-index: nothing may come from a registry, as on the machines the client is for; the
      // build is isolated, as a plain `pip install ./packages/python` builds it.
      installation = run(
        PYTHON,
        ['-m', 'pip', 'install', '--no-index', '--no-cache-dir', '--target', installed, PACKAGE],
        { cwd: ROOT, timeout: 90_000, env: { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: '1' } },
      );
      // Awaited by the tests below; this keeps a failure from being reported as unhandled before.
      installation.catch(() => {});
    });
    after(() => rmSync(installed, { recursive: true, force: true }));

    test('pip installs it from the repository with no package index', async () => {
      const { stdout } = await installation;
      assert.match(stdout, /Successfully installed safety-incident-api-\d+\.\d+\.\d+/);
    });

    for (const store of STORES) {
      describe(`against the server (${store})`, () => {
        let ctx: TestContext;
        let control: Server;
        let receiver: Receiver;
        let fixture: Record<string, unknown>;
        const seen = { fixture: 0, changes: 0, touches: 0, verified: 0, refused: 0 };
        let changeSync: () => Promise<unknown>;
        let touchSync: () => Promise<unknown>;

        before(async () => {
          ctx = await createTestContext(store, {
            WEBHOOKS_ALLOW_PRIVATE: 'true',
            WEBHOOK_TIMEOUT_MS: '5000',
          });
          await ctx.app.listen({ port: 0, host: '127.0.0.1' });
          await ctx.runtime.delivery.start();

          // The account the reads, exports and errors look at: 450 incidents, users, departments
          // and locations, an API key and an OAuth access token for the wider API.
          const reads = randomUUID();
          const incidents = Array.from({ length: INCIDENTS }, (_, i) =>
            incident(reads, i + 1, minute(i + 1)),
          );
          const users = ['Ann', 'Bob', 'Cy'].map((name) => user(reads, name));
          // The account sync() copies, changed between two syncs through the control server.
          const synced = randomUUID();
          const syncIncidents = [1, 2, 3, 4].map((i) => incident(synced, i, minute(i)));
          const syncUser = user(synced, 'Dee');
          const syncDepartment = named('department', synced, 'Quality');
          const syncLocation = named('location', synced, 'Yard');
          // An account of one request an hour: its second request is a 429 for about an hour.
          const limited = randomUUID();
          // An account whose plan loses API access once its key is made: 403.
          const withoutAccess = randomUUID();
          // The account of a webhook endpoint.
          const hooked = randomUUID();
          await importRecords(ctx, [
            account(reads, { rate_limit_per_hour: 10_000 }),
            named('department', reads, 'Operations'),
            named('department', reads, 'Logistics'),
            named('location', reads, 'Warehouse North'),
            named('location', reads, 'Dock 3'),
            ...users,
            ...incidents,
            account(synced, { rate_limit_per_hour: 10_000 }),
            syncDepartment,
            syncLocation,
            syncUser,
            ...syncIncidents,
            account(limited, { rate_limit_per_hour: 1 }),
            account(withoutAccess),
            account(hooked),
          ]);

          // A real delivery: one change after the endpoint's creation, received while the rest is
          // set up.
          receiver = await Receiver.start();
          const { secret } = await ctx.runtime.services.webhooks.create({
            accountId: hooked,
            url: receiver.url(),
            actor: 'test',
          });
          await importRecords(ctx, [
            incident(hooked, 1, minute(1), { description: 'Forklift near-miss, dock 3' }),
          ]);
          // Usually well under a second; the deadline is for a machine under load.
          const delivery = receiver.waitFor(1, 60_000);

          const created = incident(synced, 5, minute(5));
          changeSync = async () => {
            const [updated, deleted] = syncIncidents;
            assert.ok(updated !== undefined && deleted !== undefined);
            await importRecords(ctx, [
              { ...updated, status: 'closed', updated_at: minute(100) },
              gone('incident', deleted.id, synced),
              gone('user', syncUser.id, synced),
              created,
            ]);
            return {
              updated: { type: 'incident', id: updated.id, status: 'closed' },
              deleted: [
                { type: 'incident', id: deleted.id },
                { type: 'user', id: syncUser.id },
              ],
              created: { type: 'incident', id: created.id, incident_number: created.incident_number },
            };
          };
          // One more change after the sync with nothing new: where its cursor stands.
          touchSync = async () => {
            await importRecords(ctx, [{ ...created, status: 'closed', updated_at: minute(101) }]);
            return { type: 'incident', id: created.id };
          };

          const { rawKey } = await seedKey(ctx.db, reads);
          const { rawKey: noAccessKey } = await seedKey(ctx.db, withoutAccess);
          await ctx.db
            .updateTable('accounts')
            .set({ api_access: 0 })
            .where('id', '=', withoutAccess)
            .execute();
          await delivery;
          const [delivered] = receiver.received;
          assert.ok(delivered !== undefined);

          fixture = {
            incident_count: INCIDENTS,
            // The list's order: newest first.
            incident_numbers: incidents.map((row) => row.incident_number).reverse(),
            users: ['Ann', 'Bob', 'Cy'],
            departments: ['Logistics', 'Operations'],
            locations: ['Dock 3', 'Warehouse North'],
            access_token: await accessToken(ctx, reads),
            sync_api_key: (await seedKey(ctx.db, synced)).rawKey,
            sync_records: {
              incident: syncIncidents.map((row) => row.id),
              user: [syncUser.id],
              department: [syncDepartment.id],
              location: [syncLocation.id],
            },
            limited_api_key: (await seedKey(ctx.db, limited)).rawKey,
            no_access_api_key: noAccessKey,
            server_webhook: {
              body: delivered.body,
              headers: Object.fromEntries(
                ['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((name) => [
                  name,
                  String(delivered.headers[name]),
                ]),
              ),
              secret,
            },
            api_key: rawKey,
          };

          control = createServer((request, response) => {
            void (async () => {
              try {
                if (request.method === 'GET' && request.url === '/fixture') {
                  seen.fixture += 1;
                  return reply(response, 200, fixture);
                }
                if (request.method === 'POST' && request.url === '/sync/change') {
                  seen.changes += 1;
                  return reply(response, 200, await changeSync());
                }
                if (request.method === 'POST' && request.url === '/sync/touch') {
                  seen.touches += 1;
                  return reply(response, 200, await touchSync());
                }
                if (request.method === 'POST' && request.url === '/webhooks/verify') {
                  const signed = await jsonBody(request);
                  if (!isSignedWebhook(signed))
                    return reply(response, 400, { error: 'not a signed webhook' });
                  try {
                    const event = new Webhook(signed.secret).verify(signed.body, signed.headers);
                    seen.verified += 1;
                    return reply(response, 200, { event });
                  } catch (error) {
                    seen.refused += 1;
                    return reply(response, 400, { error: String(error) });
                  }
                }
                reply(response, 404, { error: `no ${request.method} ${request.url}` });
              } catch (error) {
                reply(response, 500, { error: String(error) });
              }
            })();
          });
          control.listen(0, '127.0.0.1');
          await once(control, 'listening');
        });

        after(async () => {
          control.close();
          await receiver.close();
          await ctx.close();
        });

        test('its unittest suite passes, every test run, none skipped', { timeout: 100_000 }, async () => {
          await installation;
          // Not spawnSync: this process serves the API that the suite calls.
          const child = spawn(
            PYTHON,
            ['-m', 'unittest', 'discover', '--start-directory', 'tests', '--top-level-directory', '.', '-v'],
            {
              cwd: PACKAGE,
              env: {
                ...process.env,
                // The installed copy, not the sources: what an integrator gets from pip.
                PYTHONPATH: installed,
                PYTHONDONTWRITEBYTECODE: '1',
                SAFETY_API_URL: `http://127.0.0.1:${portOf(ctx.app.server)}`,
                SAFETY_API_KEY: String(fixture.api_key),
                SAFETY_TEST_CONTROL_URL: `http://127.0.0.1:${portOf(control)}`,
                SAFETY_TEST_INSTALLED_AT: installed,
              },
            },
          );
          child.stdin.end();
          const killer = setTimeout(() => child.kill('SIGKILL'), 90_000);
          const result = await outputOf(child).finally(() => clearTimeout(killer));
          const output = `${result.stdout}${result.stderr}`;
          assert.equal(result.code, 0, output);
          assert.match(output, /^Ran \d+ tests? in /m, output);
          // `OK` alone: `OK (skipped=1)` would mean a part of the suite did not run.
          assert.match(output, /^OK$/m, output);
          assert.doesNotMatch(output, /\bskipped\b/, output);
          // The parts that run through this file happened.
          assert.ok(seen.fixture >= 1, 'the suite read the fixture');
          assert.equal(seen.changes, 1, 'the sync test changed its account once, between two syncs');
          assert.equal(seen.touches, 1, 'and once more after the sync that found nothing new');
          assert.ok(seen.verified >= 1, "standardwebhooks verified Python's signature");
          assert.ok(seen.refused >= 1, 'standardwebhooks refused a tampered one');
        });
      });
    }
  });
}
