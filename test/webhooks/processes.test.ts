import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import {
  createTestContext,
  runCli,
  type ServerProcess,
  STORES,
  seedAccount,
  startServer,
  type TestContext,
} from '../helpers.ts';
import { type Received, Receiver } from './receiver.ts';
import { sleep, until } from '../wait.ts';

/**
 * Webhook delivery across real processes: changes imported by the CLI reach a receiver served by
 * `safety-api serve` within about a second; a server killed with SIGKILL mid-stream loses nothing
 * once one runs again; two servers on one PostgreSQL database deliver each event once, and the
 * survivor takes over when the holder is killed.
 */

const LEASE_SECONDS = 2;

let files: string;
before(() => {
  files = mkdtempSync(join(tmpdir(), 'safety-webhook-processes-'));
});
after(() => rmSync(files, { recursive: true, force: true }));

function incidentsFile(accountId: string, count: number, from = 1): { path: string; ids: string[] } {
  const ids = Array.from({ length: count }, () => randomUUID());
  const path = join(files, `${randomUUID()}.ndjson`);
  writeFileSync(
    path,
    ids
      .map((id, i) =>
        JSON.stringify({
          type: 'incident',
          id,
          account_id: accountId,
          incident_number: `INC-2025-${from + i}`,
          status: 'open',
          created_at: new Date(Date.UTC(2025, 0, 1) + (from + i) * 1000).toISOString(),
          updated_at: new Date(Date.UTC(2025, 0, 1) + (from + i) * 1000).toISOString(),
        }),
      )
      .join('\n'),
  );
  return { path, ids };
}

/** The seqs in the order they first arrived: increasing when the stream kept feed order. */
function firstArrivals(received: Received[]): number[] {
  const seen = new Set<number>();
  const order: number[] = [];
  for (const r of received) {
    const seq = r.json.data.seq ?? 0;
    if (!seen.has(seq)) order.push(seq);
    seen.add(seq);
  }
  return order;
}

/** Every repeat of an event carried the webhook-id of its first delivery. */
function assertStableIds(received: Received[]): void {
  const idOf = new Map<number, string>();
  for (const r of received) {
    const seq = r.json.data.seq ?? 0;
    const id = String(r.headers['webhook-id']);
    assert.equal(idOf.get(seq) ?? id, id, `seq ${seq} was sent again with another webhook-id`);
    idOf.set(seq, id);
  }
}

for (const store of STORES) {
  describe(`webhook delivery across processes (${store})`, () => {
    let ctx: TestContext;
    let receiver: Receiver;
    let accountId: string;
    let env: Record<string, string>;
    const servers: ServerProcess[] = [];

    before(async () => {
      ctx = await createTestContext(store, { WEBHOOKS_ALLOW_PRIVATE: 'true' });
      env = {
        DATABASE_URL: ctx.databaseUrl,
        WEBHOOKS_ALLOW_PRIVATE: 'true',
        WEBHOOK_LEASE_SECONDS: String(LEASE_SECONDS),
        WEBHOOK_TIMEOUT_MS: '1000',
      };
    });
    after(() => ctx.close());
    beforeEach(async () => {
      receiver = await Receiver.start();
      accountId = await seedAccount(ctx.db);
      await ctx.runtime.services.webhooks.create({
        accountId,
        url: receiver.url(),
        actor: 'test',
      });
    });
    afterEach(async () => {
      for (const server of servers.splice(0)) await server.exited(100).catch(() => {});
      await receiver.close();
    });

    const start = async () => {
      const server = await startServer(env);
      servers.push(server);
      // Deliveries start once the server listens; the log line says when they run.
      for (let i = 0; i < 100 && !server.logs().includes('webhook deliveries started'); i += 1)
        await sleep(50);
      return server;
    };

    test('a change imported by the CLI in another process reaches the receiver within about a second', async () => {
      const server = await start();
      assert.match(
        server.logs(),
        /"level":40,[^\n]*"msg":"WEBHOOKS_ALLOW_PRIVATE=true: webhooks may go to http/,
      );
      // No SMTP_URL, and the database has endpoints: nobody would be told of a failing one.
      await until(
        () => /"level":40,[^\n]*"msg":"SMTP_URL is unset: no Super Admin is mailed/.test(server.logs()),
        5000,
        'the warning that no mail is sent',
      );
      const latencies: number[] = [];
      for (let i = 0; i < 5; i += 1) {
        const { path, ids } = incidentsFile(accountId, 1, i + 1);
        const result = await runCli(['import', path], env);
        assert.equal(result.code, 0, result.stderr);
        const committed = Date.now();
        await receiver.waitFor(i + 1, 5000);
        const received = receiver.received[i] as Received;
        assert.equal(received.json.data.id, ids[0]);
        latencies.push(Math.max(0, received.at - committed));
      }
      assert.ok(Math.max(...latencies) < 1000, `from the CLI's exit to receipt: ${latencies.join(', ')} ms`);
      assert.ok(!server.logs().includes('whsec_'), 'no secret in the logs');
    });

    test('kill -9 mid-stream: after a restart every event arrives, in order, repeats with the same webhook-id', async () => {
      // A receiver that takes a little time, so that the kill lands mid-stream.
      receiver.answer = (_r, response) => {
        setTimeout(() => {
          response.statusCode = 204;
          response.end();
        }, 1);
      };
      const first = await start();
      const { path, ids } = incidentsFile(accountId, 2000);
      assert.equal((await runCli(['import', path], env)).code, 0);
      await receiver.waitFor(300, 20_000);
      first.signal('SIGKILL');
      await first.exited(5000);
      const cut = receiver.received.length;
      assert.ok(cut < 2000, `the kill came mid-stream (${cut} received)`);
      await start();
      await receiver.waitFor(2000, 60_000);
      const seqs = new Set(receiver.received.map((r) => r.json.data.seq));
      for (let wait = 0; seqs.size < 2000 && wait < 200; wait += 1) {
        await sleep(100);
        for (const r of receiver.received) seqs.add(r.json.data.seq);
      }
      assert.equal(seqs.size, 2000, 'every event arrived');
      assert.deepEqual(new Set(receiver.received.map((r) => r.json.data.id)), new Set(ids));
      const order = firstArrivals(receiver.received);
      assert.deepEqual(
        order,
        [...order].sort((a, b) => a - b),
        'first arrivals in feed order',
      );
      assertStableIds(receiver.received);
    });

    test('SIGTERM: the server stops within its deadline and gives up its leases, so another instance takes over at once', async () => {
      const server = await start();
      const leaseOwner = async () =>
        (
          await ctx.db
            .selectFrom('webhook_endpoints')
            .select('lease_owner')
            .where('account_id', '=', accountId)
            .executeTakeFirstOrThrow()
        ).lease_owner;
      for (let i = 0; i < 100 && (await leaseOwner()) === null; i += 1) await sleep(50);
      assert.notEqual(await leaseOwner(), null, 'the server holds the endpoint');
      server.signal('SIGTERM');
      const { code, ms } = await server.exited(15_000);
      assert.equal(code, 0);
      assert.ok(ms < 10_000, `stopped in ${ms} ms`);
      assert.equal(await leaseOwner(), null, 'released, not left to run out');
    });

    if (store === 'postgres') {
      test('two instances: each event is delivered once; when the holder is killed, the survivor takes over', async () => {
        const one = await start();
        const two = await start();
        const first = incidentsFile(accountId, 1000);
        assert.equal((await runCli(['import', first.path], env)).code, 0);
        await receiver.waitFor(1000, 30_000);
        await sleep(500);
        assert.equal(receiver.received.length, 1000, 'no event twice without a fault');
        assert.equal(new Set(receiver.received.map((r) => r.headers['webhook-id'])).size, 1000);

        const owner = await ctx.db
          .selectFrom('webhook_endpoints')
          .select('lease_owner')
          .where('account_id', '=', accountId)
          .executeTakeFirstOrThrow();
        const instanceOf = (server: ServerProcess) => /"instance":"([0-9a-f-]{36})"/.exec(server.logs())?.[1];
        // A lease is held under a claim token, `INSTANCE/N`.
        const holding = owner.lease_owner?.split('/')[0];
        const [holder, survivor] = instanceOf(one) === holding ? [one, two] : [two, one];
        assert.equal(instanceOf(holder), holding, 'one of the two holds the lease');

        receiver.answer = (_r, response) => {
          setTimeout(() => {
            response.statusCode = 204;
            response.end();
          }, 1);
        };
        const second = incidentsFile(accountId, 1500, 1001);
        assert.equal((await runCli(['import', second.path], env)).code, 0);
        await receiver.waitFor(1200, 20_000);
        holder.signal('SIGKILL');
        await holder.exited(5000);
        await receiver.waitFor(2500, 60_000);
        const seqs = new Set(receiver.received.map((r) => r.json.data.seq));
        for (let wait = 0; seqs.size < 2500 && wait < 200; wait += 1) {
          await sleep(100);
          for (const r of receiver.received) seqs.add(r.json.data.seq);
        }
        assert.equal(seqs.size, 2500, 'every event arrived');
        const order = firstArrivals(receiver.received);
        assert.deepEqual(
          order,
          [...order].sort((a, b) => a - b),
        );
        assertStableIds(receiver.received);
        const taken = await ctx.db
          .selectFrom('webhook_endpoints')
          .select('lease_owner')
          .where('account_id', '=', accountId)
          .executeTakeFirstOrThrow();
        assert.equal(taken.lease_owner?.split('/')[0], instanceOf(survivor), 'the survivor holds the lease');
      });
    }
  });
}
