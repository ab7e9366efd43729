import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { hourOf, KeyUsageRecorder } from '../../src/auth/key-usage.ts';
import { runCli, STORES, seedKey } from '../helpers.ts';
import { type OauthServer, startOauthServer } from '../oauth/harness.ts';
import {
  catalogColumns,
  everyRow,
  idsOfAccount,
  type PopulatedAccount,
  populateAccount,
  publicGet,
  rowsMentioning,
} from './account-fixtures.ts';

/**
 * `safety-api accounts delete --account ID --confirm ID`: the account and everything of it go, in
 * one transaction, checked table by table over every table the database catalog lists; other
 * accounts keep every row; a wrong confirmation or an unknown account changes nothing.
 */

for (const store of STORES) {
  describe(`accounts delete (${store})`, () => {
    let server: OauthServer;
    let env: Record<string, string>;
    before(async () => {
      server = await startOauthServer(store, { WEBHOOKS_ALLOW_PRIVATE: 'true' });
      env = { DATABASE_URL: server.ctx.databaseUrl, WEBHOOKS_ALLOW_PRIVATE: 'true' };
    });
    after(() => server.close());

    const cli = (args: string[], extra: Record<string, string> = {}) => runCli(args, { ...env, ...extra });

    test('leaves no row of the account in any table, and every row of the others', async () => {
      const { db, app } = server.ctx;
      const gone = await populateAccount(server, env);
      const kept = await populateAccount(server, env);
      const goneIds = await idsOfAccount(db, gone.accountId);
      const keptIds = await idsOfAccount(db, kept.accountId);
      const keptAnswer = await publicGet(app, kept.rawKey, '/api/v1/public/incidents?limit=200');
      assert.equal(keptAnswer.status, 200);
      // That request's last use and usage are in the store before the rows are compared.
      await server.ctx.runtime.lastUse.flush();
      await server.ctx.runtime.keyUsage.flush();
      const before = await everyRow(db);
      const goneBefore = rowsMentioning(before, goneIds);
      // The fixture reaches every table that belongs to accounts (an `account_id` column) and every
      // table the other account has rows in: none is checked vacuously.
      const keptBefore = rowsMentioning(before, keptIds);
      for (const table of before.keys()) {
        if (keptBefore.has(table) || (await catalogColumns(db, table)).includes('account_id')) {
          assert.ok(goneBefore.has(table), `the account has rows in ${table} before its deletion`);
        }
      }

      const result = await cli(
        ['accounts', 'delete', '--account', gone.accountId, '--confirm', gone.accountId],
        { LOG_LEVEL: 'info' },
      );
      assert.equal(result.code, 0, result.stderr);

      const afterRows = await everyRow(db);
      assert.deepEqual(
        [...afterRows.keys()],
        [...before.keys()],
        'the same tables (no table dropped or added)',
      );
      assert.deepEqual(Object.fromEntries(rowsMentioning(afterRows, goneIds)), {}, 'no row of the account');
      assert.deepEqual(rowsMentioning(afterRows, keptIds), keptBefore, 'the other account keeps every row');

      // What went, per table, in the service log (one JSON line) and on standard output.
      const logged = result.stderr
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map(
          (line) => JSON.parse(line) as { msg: string; account_id: string; erased: Record<string, number> },
        );
      assert.equal(logged.length, 1, result.stderr);
      const [line] = logged;
      assert.equal(line?.msg, 'account erased');
      assert.equal(line?.account_id, gone.accountId);
      const rowsBefore = Object.fromEntries([...goneBefore].map(([table, rows]) => [table, rows.length]));
      const erased = Object.fromEntries(Object.entries(line?.erased ?? {}).filter(([, n]) => n > 0));
      assert.deepEqual(erased, rowsBefore, 'the counts are the rows the account had, table by table');
      assert.match(
        result.stdout,
        new RegExp(`^Deleted account ${gone.accountId}: .*incidents ${gone.incidentIds.length}`),
      );

      // Its key, its feed, its partner app's token: gone. The other account answers as before.
      const refused = await publicGet(app, gone.rawKey, '/api/v1/public/changes');
      assert.equal(refused.status, 401);
      assert.equal((refused.body as { error: string }).error, 'API_KEY_INVALID');
      const wider = await app.inject({
        url: '/api/v1/incidents',
        headers: { authorization: `Bearer ${gone.accessToken}` },
      });
      assert.equal(wider.statusCode, 401);
      assert.deepEqual(await publicGet(app, kept.rawKey, '/api/v1/public/incidents?limit=200'), keptAnswer);
    });

    test('usage a server counted before the deletion is not written back for the deleted key', async () => {
      const { db } = server.ctx;
      const gone = await populateAccount(server, env, { incidents: 2 });
      const kept = await populateAccount(server, env, { incidents: 2 });
      const keyOf = async (accountId: string) =>
        (
          await db
            .selectFrom('api_keys')
            .select('id')
            .where('account_id', '=', accountId)
            .where('state', '=', 'active')
            .executeTakeFirstOrThrow()
        ).id;
      const [goneKey, keptKey] = [await keyOf(gone.accountId), await keyOf(kept.accountId)];
      // A server's recorder that has counted requests of both keys and not flushed them when the
      // command runs (its own timer never fires within the test).
      const recorder = new KeyUsageRecorder(db, (error) => assert.fail(String(error)), {
        intervalMs: 3_600_000,
      });
      const hourAgo = Date.now() - 3_600_000;
      for (const keyId of [goneKey, keptKey]) recorder.record(keyId, 200, hourAgo);
      const result = await cli([
        'accounts',
        'delete',
        '--account',
        gone.accountId,
        '--confirm',
        gone.accountId,
      ]);
      assert.equal(result.code, 0, result.stderr);
      await recorder.close();
      const usage = await db.selectFrom('key_usage').select(['key_id', 'hour', 'ok']).execute();
      assert.deepEqual(
        usage.filter((row) => row.key_id === goneKey),
        [],
        'no usage row of a deleted key',
      );
      assert.deepEqual(
        usage
          .filter((row) => row.key_id === keptKey && row.hour === hourOf(hourAgo))
          .map((row) => Number(row.ok)),
        [1],
        "the other account's usage is written",
      );
    });

    test('a --confirm that is not the account id refuses and changes nothing', async () => {
      const { db } = server.ctx;
      const account: PopulatedAccount = await populateAccount(server, env, { incidents: 3 });
      const before = await everyRow(db);
      for (const confirm of [randomUUID(), account.accountId.toUpperCase(), `${account.accountId} `]) {
        const result = await cli([
          'accounts',
          'delete',
          '--account',
          account.accountId,
          '--confirm',
          confirm,
        ]);
        assert.equal(result.code, 2);
        assert.equal(result.stdout, '');
        assert.match(
          result.stderr,
          /^safety-api: --confirm ".*" is not the account id ".*": nothing was deleted\n$/,
        );
      }
      const missing = await cli(['accounts', 'delete', '--account', account.accountId]);
      assert.equal(missing.code, 2);
      assert.equal(
        missing.stderr,
        'safety-api: accounts delete needs --account ID and --confirm ID (the same id again)\n',
      );
      assert.deepEqual(await everyRow(db), before);
      assert.equal((await publicGet(server.ctx.app, account.rawKey, '/api/v1/public/users')).status, 200);
    });

    test('an unknown account is a one-line error, exit non-zero, and changes nothing', async () => {
      const { db } = server.ctx;
      const accountId = (await populateAccount(server, env, { incidents: 2 })).accountId;
      await seedKey(db, accountId);
      const before = await everyRow(db);
      const unknown = randomUUID();
      const result = await cli(['accounts', 'delete', '--account', unknown, '--confirm', unknown], {
        LOG_LEVEL: 'info',
      });
      assert.equal(result.code, 2);
      assert.equal(result.stdout, '');
      assert.equal(result.stderr, `safety-api: no account with id "${unknown}"\n`);
      assert.deepEqual(await everyRow(db), before);
    });
  });
}
