import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { accountRepository } from '../../src/db/repositories/accounts.ts';
import type { ChangeStamp } from '../../src/db/repositories/change-stamp.ts';
import { type IncidentInput, incidentRepository } from '../../src/db/repositories/incidents.ts';
import { IncidentWriter } from '../../src/services/incident-writer.ts';
import { createTestContext, random, STORES, seedAccount, type TestContext } from '../helpers.ts';

/**
 * The incident writer driven as a writer other than the import would drive it: incidents taken in
 * an order of its own, written in batches, some removed, then settled; every page of the account
 * must then be right, read as the APIs read it (position ranges).
 */

const BATCH = 50;

function incidentAt(accountId: string, minute: number): IncidentInput {
  const at = new Date(Date.UTC(2026, 0, 1, 0, minute)).toISOString();
  return {
    id: randomUUID(),
    account_id: accountId,
    incident_number: `INC-2026-${String(minute).padStart(4, '0')}`,
    description: null,
    status: 'open',
    severity_likelihood: null,
    severity_impact: null,
    location: null,
    incident_date: null,
    created_at: at,
    updated_at: at,
  };
}

const byPagingOrder = (a: IncidentInput, b: IncidentInput) =>
  a.created_at !== b.created_at ? (a.created_at < b.created_at ? -1 : 1) : a.id < b.id ? -1 : 1;

for (const store of STORES) {
  describe(`IncidentWriter (${store})`, () => {
    let ctx: TestContext;
    before(async () => {
      ctx = await createTestContext(store);
    });
    after(() => ctx.close());

    /**
     * Writes `incidents` in the order given and removes `removals` (ids) in one transaction,
     * through a writer; returns the incident count `settle` gave.
     */
    const write = (accountId: string, incidents: IncidentInput[], removals: string[]) =>
      ctx.db.transaction().execute(async (trx) => {
        const writer = new IncidentWriter(trx, {
          recordsAtMost: async () => incidents.length,
          async *incidentKeys() {
            yield incidents.map(({ id, account_id, created_at }) => ({ id, account_id, created_at }));
          },
        });
        await writer.start();
        let seq = (await accountRepository.lockForChanges(trx, accountId)) ?? 0;
        const changedAt = new Date().toISOString();
        const stamp = <Row extends object>(row: Row): Row & ChangeStamp => {
          seq += 1;
          return Object.assign(row, { change_seq: seq, changed_at: changedAt, created_seq: seq });
        };
        let taken = 0;
        for (let from = 0; from < incidents.length; from += BATCH) {
          const pending: (IncidentInput & ChangeStamp)[] = [];
          for (const row of incidents.slice(from, from + BATCH)) {
            if (writer.waits(accountId, row)) await writer.prepare(accountId, row, taken, () => pending);
            writer.place(row, taken);
            taken += 1;
            pending.push(stamp(row));
          }
          await incidentRepository.upsertMany(trx, pending);
          await writer.written(pending.map((row) => row.id));
          writer.batchWritten();
        }
        if (removals.length > 0) {
          if (writer.waits(accountId, null)) await writer.prepare(accountId, null, taken, () => []);
          const refs = removals.map((id) => stamp({ id, account_id: accountId }));
          writer.removed(await incidentRepository.deleteMany(trx, refs));
        }
        await writer.finish();
        const incidentCount = await writer.settle(accountId);
        await accountRepository.recordChanges(trx, accountId, { lastSeq: seq, incidentCount, purgedSeq: 0 });
        return incidentCount;
      });

    const checkPages = async (accountId: string, model: IncidentInput[], label: string) => {
      const row = await ctx.db
        .selectFrom('accounts')
        .select(['incident_count', 'data_version', 'created_at'])
        .where('id', '=', accountId)
        .executeTakeFirstOrThrow();
      assert.equal(row.incident_count, model.length, `${label}: the count`);
      const newestFirst = [...model]
        .sort(byPagingOrder)
        .reverse()
        .map((i) => i.id);
      const totals = { total: row.incident_count, version: row.data_version, incarnation: row.created_at };
      for (const limit of [1, 7, 50]) {
        for (let offset = 0; offset <= model.length; offset += limit === 1 ? 17 : 11) {
          const page = await ctx.runtime.services.incidents.listNewestFirst(accountId, totals, offset, limit);
          assert.deepEqual(
            page.map((i) => i.id),
            newestFirst.slice(offset, offset + limit),
            `${label}: offset ${offset}, limit ${limit}`,
          );
        }
      }
    };

    test('in order, newest first and shuffled, then with removals: settled, every page is right', async () => {
      const next = random(store === 'sqlite' ? 5 : 9);
      const shuffled = <T>(items: T[]) => {
        const copy = [...items];
        for (let i = copy.length - 1; i > 0; i -= 1) {
          const j = Math.floor(next() * (i + 1));
          [copy[i], copy[j]] = [copy[j] as T, copy[i] as T];
        }
        return copy;
      };
      const cases: [string, (rows: IncidentInput[]) => IncidentInput[]][] = [
        ['oldest first', (rows) => rows],
        ['newest first', (rows) => [...rows].reverse()],
        ['shuffled', shuffled],
      ];
      for (const [order, arrange] of cases) {
        const accountId = await seedAccount(ctx.db);
        const model = Array.from({ length: 400 }, (_, i) => incidentAt(accountId, i));
        assert.equal(await write(accountId, arrange(model), []), 400, order);
        await checkPages(accountId, model, order);

        // Then removals across blocks, and newer and older incidents in the same transaction.
        const removed = new Set(
          shuffled(model)
            .slice(0, 60)
            .map((i) => i.id),
        );
        const added = [incidentAt(accountId, 1000), incidentAt(accountId, 1001)];
        const kept = [...model.filter((i) => !removed.has(i.id)), ...added];
        assert.equal(await write(accountId, added, [...removed]), kept.length, `${order}, then removals`);
        await checkPages(accountId, kept, `${order}, then removals`);
      }
    });

    test('settle says nothing of an account whose incidents it did not write', async () => {
      const accountId = await seedAccount(ctx.db);
      const untouched = await ctx.db.transaction().execute(async (trx) => {
        const writer = new IncidentWriter(trx, {
          recordsAtMost: async () => 0,
          async *incidentKeys() {},
        });
        await writer.start();
        await writer.finish();
        return writer.settle(accountId);
      });
      assert.equal(untouched, undefined);
    });
  });
}
