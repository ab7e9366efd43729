import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Kysely } from 'kysely';
import { type DatabaseHandle, openDatabase } from '../../src/db/database.ts';
import type { Database } from '../../src/db/schema.ts';
import { InputError } from '../../src/errors.ts';
import { apiKeyService } from '../../src/services/api-key-service.ts';
import { runCli, STORES, seedAccount, seedKey, type TestContext, createTestContext } from '../helpers.ts';

/**
 * Concurrent state changes of one key (issue 10, item 8): whatever the interleaving, the audit
 * trail is a history of legal transitions, the key ends in the state its last event says, and a
 * revoked key never becomes active or disabled again.
 */

type Action = 'enable' | 'disable' | 'revoke';

const EFFECT: Record<string, string> = { enabled: 'active', disabled: 'disabled', revoked: 'revoked' };
// What each audited action may follow: the checks enable/disable/revoke make on the state read.
const ALLOWED_FROM: Record<string, string[]> = {
  enabled: ['disabled'],
  disabled: ['active'],
  revoked: ['active', 'disabled'],
};

const REFUSALS = /already (enabled|disabled|revoked)|revoked key cannot be|being changed by someone else/;

/** Checks the key's audit trail against its row; returns the actions the trail records. */
async function assertConsistentHistory(db: Kysely<Database>, keyId: string): Promise<string[]> {
  const events = await db
    .selectFrom('audit_events')
    .select(['id', 'action'])
    .where('subject_id', '=', keyId)
    .where('action', 'in', ['enabled', 'disabled', 'revoked'])
    .orderBy('id')
    .execute();
  let state = 'active';
  for (const [i, event] of events.entries()) {
    assert.ok(
      (ALLOWED_FROM[event.action] as string[]).includes(state),
      `event ${i} "${event.action}" cannot follow state "${state}": ${events.map((e) => e.action).join(', ')}`,
    );
    state = EFFECT[event.action] as string;
  }
  const row = await db
    .selectFrom('api_keys')
    .select('state')
    .where('id', '=', keyId)
    .executeTakeFirstOrThrow();
  assert.equal(row.state, state, 'the key is in the state its last audit event says');
  return events.map((e) => e.action);
}

/** A mix in which several calls decide on the same state at once; revokes sit among enables. */
function burst(round: number): Action[] {
  const actions: Action[] = [];
  for (let i = 0; i < 24; i += 1) actions.push(i % 2 === 0 ? 'disable' : 'enable');
  actions.splice(8 + (round % 5), 0, 'revoke');
  actions.splice(18, 0, 'revoke');
  return actions;
}

for (const store of STORES) {
  describe(`API key state changes under concurrency (${store})`, () => {
    let ctx: TestContext;
    let second: DatabaseHandle;
    let dbs: Kysely<Database>[];

    before(async () => {
      ctx = await createTestContext(store);
      // PostgreSQL: two pools, as two server instances (or the CLI and a server) would be. SQLite
      // serializes one process's transactions on its one connection; other processes are below.
      second = openDatabase(ctx.databaseUrl);
      dbs = store === 'postgres' ? [ctx.db, second.db] : [ctx.db];
    });
    after(async () => {
      await second.destroy();
      await ctx.close();
    });

    test('concurrent enable, disable and revoke: legal history, final state = last event, revoked stays revoked', async () => {
      const accountId = await seedAccount(ctx.db);
      for (let round = 0; round < 8; round += 1) {
        const { id } = await seedKey(ctx.db, accountId);
        if (round % 2 === 1) await apiKeyService.disable(ctx.db, id, 'test');
        const actions = burst(round);
        const results = await Promise.allSettled(
          actions.map((action, i) =>
            apiKeyService[action](dbs[i % dbs.length] as Kysely<Database>, id, 'test'),
          ),
        );
        for (const result of results) {
          if (result.status === 'rejected') {
            assert.ok(result.reason instanceof InputError, String(result.reason));
            assert.match(result.reason.message, REFUSALS);
          }
        }
        const history = await assertConsistentHistory(ctx.db, id);
        const succeeded = (action: Action) =>
          results.filter((r, i) => r.status === 'fulfilled' && actions[i] === action).length;
        assert.equal(history.filter((a) => a === 'revoked').length, succeeded('revoke'));
        assert.equal(history.filter((a) => a === 'enabled').length, succeeded('enable'));
        assert.equal(
          history.filter((a) => a === 'disabled').length,
          succeeded('disable') + (round % 2 === 1 ? 1 : 0),
        );
        assert.equal(succeeded('revoke'), 1, 'exactly one of the revokes wins');

        // Once revoked, no later change brings it back.
        await assert.rejects(apiKeyService.enable(ctx.db, id, 'test'), /revoked key cannot be enabled/);
        const key = await ctx.db
          .selectFrom('api_keys')
          .select('state')
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        assert.equal(key.state, 'revoked');
      }
    });

    if (store === 'sqlite') {
      test('CLI processes changing one key at once on one SQLite file: each succeeds or is refused cleanly, history legal', async () => {
        const accountId = await seedAccount(ctx.db);
        const { id } = await seedKey(ctx.db, accountId);
        await apiKeyService.disable(ctx.db, id, 'test');
        const actions: Action[] = [
          'enable',
          'revoke',
          'enable',
          'disable',
          'enable',
          'revoke',
          'enable',
          'disable',
        ];
        // Separate processes, separate connections: SQLite lets one write at a time, and a
        // transaction that read before another process committed cannot write at all.
        const runs = await Promise.all(
          actions.map((action) => runCli(['keys', action, id], { DATABASE_URL: ctx.databaseUrl })),
        );
        for (const [i, run] of runs.entries()) {
          if (run.code === 0) continue;
          assert.equal(run.code, 2, `${actions[i]}: ${run.stderr}`);
          assert.match(run.stderr, REFUSALS, `${actions[i]} failed with something else than a refusal`);
        }
        const history = await assertConsistentHistory(ctx.db, id);
        assert.equal(history.filter((a) => a === 'revoked').length, 1);
        assert.equal(
          history.length - 1,
          runs.filter((r) => r.code === 0).length,
          'one audit event per successful command',
        );
      });
    }
  });
}
