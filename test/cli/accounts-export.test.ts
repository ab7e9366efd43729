import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { EXPORT_ONLY_TYPES, RECORD_TYPES } from '../../src/import/validation.ts';
import { accountDataService } from '../../src/services/account-data-service.ts';
import { createTestContext, runCli, STORES, seedKey, type TestContext } from '../helpers.ts';
import { type OauthServer, startOauthServer } from '../oauth/harness.ts';
import { idsOfAccount, importRecords, populateAccount, publicGet } from './account-fixtures.ts';

/**
 * `safety-api accounts export --account ID --to FILE`: one NDJSON file of everything of the
 * account, which `safety-api import` takes back: imported into a fresh store, the public API
 * answers for the account exactly as it did; no secret is in it, nor anything of another account;
 * it is read from one snapshot.
 */

type Line = Record<string, unknown> & { type: string };

const linesOf = (text: string): Line[] =>
  text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Line);

const isRecord = (line: Line) => (RECORD_TYPES as readonly string[]).includes(line.type);

/** Everything the public API answers for the account, keyed by URL. */
async function publicAnswers(
  app: FastifyInstance,
  rawKey: string,
  incidentIds: string[],
): Promise<Record<string, unknown>> {
  const urls = [
    '/api/v1/public/incidents',
    '/api/v1/public/incidents?page=2&limit=7',
    '/api/v1/public/users',
    '/api/v1/public/departments',
    '/api/v1/public/locations',
    ...['incidents', 'users', 'departments', 'locations'].flatMap((set) => [
      `/api/v1/public/exports/${set}.ndjson`,
      `/api/v1/public/exports/${set}.csv`,
    ]),
    ...incidentIds.map((id) => `/api/v1/public/incidents/${id}`),
  ];
  const pages = Math.ceil(incidentIds.length / 200) + 1;
  for (let page = 1; page <= pages; page += 1) urls.push(`/api/v1/public/incidents?limit=200&page=${page}`);
  const answers: Record<string, unknown> = {};
  for (const url of urls) {
    const answer = await publicGet(app, rawKey, url);
    assert.ok(answer.status === 200 || url.includes('/incidents/'), `${url}: ${answer.status}`);
    answers[url] = answer;
  }
  return answers;
}

for (const store of STORES) {
  describe(`accounts export (${store})`, () => {
    let server: OauthServer;
    let fresh: TestContext;
    let env: Record<string, string>;
    let dir: string;
    before(async () => {
      server = await startOauthServer(store, { WEBHOOKS_ALLOW_PRIVATE: 'true' });
      fresh = await createTestContext(store);
      env = { DATABASE_URL: server.ctx.databaseUrl, WEBHOOKS_ALLOW_PRIVATE: 'true' };
      dir = mkdtempSync(join(tmpdir(), 'accounts-export-'));
    });
    after(async () => {
      await fresh.close();
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    });

    test('imported into a fresh store, the export gives the same public answers; no secret, nothing of another account', async () => {
      const account = await populateAccount(server, env, { incidents: 450 });
      const other = await populateAccount(server, env, { incidents: 3 });
      const file = join(dir, `${account.accountId}.ndjson`);
      const result = await runCli(['accounts', 'export', '--account', account.accountId, '--to', file], env);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(statSync(file).mode & 0o777, 0o600, 'readable by its owner only');
      const text = readFileSync(file, 'utf8');
      const lines = linesOf(text);

      const counts: Record<string, number> = {};
      for (const line of lines) counts[line.type] = (counts[line.type] ?? 0) + 1;
      assert.deepEqual(
        { ...counts, audit_event: undefined },
        {
          account: 1,
          department: 3,
          location: 3,
          // Four imported, the panel's super admin and the partner app's user.
          user: 6,
          incident: account.incidentIds.length,
          api_key: 2,
          webhook_endpoint: 1,
          oauth_client: 1,
          oauth_grant: 1,
          audit_event: undefined,
        },
      );
      assert.ok(
        (counts.audit_event ?? 0) >= 4,
        'the keys, their revocation and the endpoint are in the trail',
      );
      assert.equal(
        result.stdout,
        `Exported account ${account.accountId} to ${file}: ${Object.entries(counts)
          .map(([type, n]) => `${n} ${type}`)
          .join(', ')}.\n`,
      );
      // Records first, in the order import writes them; the export-only lines after.
      const order = lines.map((line) => line.type).filter((type, i, all) => all[i - 1] !== type);
      assert.deepEqual(order, [...RECORD_TYPES, ...EXPORT_ONLY_TYPES]);
      // Incidents in paging order (oldest first): an import places them without re-ranking.
      assert.deepEqual(
        lines.filter((line) => line.type === 'incident').map((line) => line.id),
        account.incidentIds,
      );

      for (const line of lines) {
        assert.equal(line.type === 'account' ? line.id : line.account_id, account.accountId);
        for (const field of Object.keys(line)) {
          assert.doesNotMatch(field, /hash|secret|password|token/, `${line.type} has no field "${field}"`);
        }
      }
      for (const secret of account.secrets) assert.ok(!text.includes(secret), 'no secret in the export');
      for (const id of await idsOfAccount(server.ctx.db, other.accountId)) {
        assert.ok(!text.includes(id), 'nothing of the other account');
      }

      const imported = await runCli(['import', file], { DATABASE_URL: fresh.databaseUrl });
      assert.equal(imported.code, 0, imported.stderr);
      assert.equal(
        imported.stdout,
        `Imported 1 accounts, 3 departments, 3 locations, 6 users, ${account.incidentIds.length} incidents.\n` +
          `Skipped 2 api_key, 1 webhook_endpoint, 1 oauth_client, 1 oauth_grant, ${counts.audit_event} audit_event ` +
          '(lines of an accounts export that an import does not restore).\n',
      );
      const key = await seedKey(fresh.db, account.accountId);
      const ids = [...account.incidentIds, randomUUID()];
      assert.deepEqual(
        await publicAnswers(fresh.app, key.rawKey, ids),
        await publicAnswers(server.ctx.app, account.rawKey, ids),
      );

      // Exported again from the fresh store, the records are the same lines.
      const again = join(dir, 'again.ndjson');
      const second = await runCli(['accounts', 'export', '--account', account.accountId, '--to', again], {
        DATABASE_URL: fresh.databaseUrl,
      });
      assert.equal(second.code, 0, second.stderr);
      assert.deepEqual(linesOf(readFileSync(again, 'utf8')).filter(isRecord), lines.filter(isRecord));
    });

    test('reads one snapshot: what is committed while it is written is not in it', async () => {
      const { db } = server.ctx;
      const account = await populateAccount(server, env, { incidents: 30 });
      const exportText = async (during?: () => Promise<void>) => {
        let text = '';
        let pending = during;
        const sink = new Writable({
          highWaterMark: 1,
          write(chunk: Buffer, _encoding, done) {
            text += chunk.toString('utf8');
            const change = pending;
            pending = undefined;
            if (change === undefined) done();
            else change().then(() => done(), done);
          },
        });
        await accountDataService.exportAccount(server.ctx.runtime.database, account.accountId, () => sink, {
          chunkRows: 4,
        });
        return text;
      };
      const department = await db
        .selectFrom('departments')
        .select(['id', 'created_at'])
        .where('account_id', '=', account.accountId)
        .executeTakeFirstOrThrow();
      const before = await exportText();
      // After the export's first line: new incidents, a department renamed, an incident deleted,
      // another key, all committed by other connections.
      const during = await exportText(async () => {
        await importRecords(
          [
            { ...department, type: 'department', account_id: account.accountId, name: 'Renamed' },
            { type: 'incident', id: account.incidentIds[5], account_id: account.accountId, deleted: true },
            ...Array.from({ length: 9 }, (_, i) => ({
              type: 'incident',
              id: randomUUID(),
              account_id: account.accountId,
              incident_number: `INC-2099-${i + 1}`,
              status: 'open',
              created_at: `2099-01-01T00:00:0${i}.000Z`,
            })),
          ],
          env,
        );
        await seedKey(db, account.accountId);
      });
      assert.equal(during, before);
      const afterwards = linesOf(await exportText());
      assert.equal(
        afterwards.filter((line) => line.type === 'incident').length,
        account.incidentIds.length + 8,
      );
      assert.ok(afterwards.some((line) => line.name === 'Renamed'));
    });

    test('an unknown account or a bad --to is a one-line error, and no file is left', async () => {
      const account = await populateAccount(server, env, { incidents: 2 });
      const target = join(dir, 'refused');
      rmSync(target, { recursive: true, force: true });
      writeFileSync(join(dir, 'keep.txt'), '');
      const unknown = randomUUID();
      const cases: [string[], string][] = [
        [
          ['--account', unknown, '--to', join(target, 'x.ndjson')],
          `safety-api: no account with id "${unknown}"\n`,
        ],
        [
          ['--account', account.accountId, '--to', join(target, 'x.json')],
          `safety-api: --to must name a .ndjson file, the format import reads it as (got "${join(target, 'x.json')}")\n`,
        ],
        [
          ['--account', account.accountId, '--to', join(target, 'missing', 'x.ndjson')],
          `safety-api: cannot write "${join(target, 'missing', 'x.ndjson')}" (ENOENT): nothing was exported\n`,
        ],
        [['--account', account.accountId], 'safety-api: accounts export needs --account ID and --to FILE\n'],
        [
          ['--to', join(target, 'x.ndjson')],
          'safety-api: accounts export needs --account ID and --to FILE\n',
        ],
      ];
      mkdirSync(target);
      for (const [args, stderr] of cases) {
        const result = await runCli(['accounts', 'export', ...args], env);
        assert.equal(result.code, 2, result.stderr);
        assert.equal(result.stdout, '');
        assert.equal(result.stderr, stderr);
      }
      assert.deepEqual(readdirSync(target), [], 'no file, not even a partial one');
      assert.ok(existsSync(join(dir, 'keep.txt')));
    });
  });
}
