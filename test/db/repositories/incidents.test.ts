import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { type DatabaseHandle, openDatabase } from '../../../src/db/database.ts';
import { migrateToLatest } from '../../../src/db/migrate.ts';
import { accountRepository } from '../../../src/db/repositories/accounts.ts';
import { IncidentExistsError, incidentRepository } from '../../../src/db/repositories/incidents.ts';
import { createTestDatabase, STORES, type TestDatabase } from '../../helpers.ts';

for (const store of STORES) {
  describe(`incidentRepository.insertNew (${store})`, () => {
    let database: TestDatabase;
    let handle: DatabaseHandle;
    const accountId = randomUUID();
    const incident = (n: number, extra: { description?: string | null } = {}) => ({
      id: randomUUID(),
      account_id: accountId,
      incident_number: `INC-2025-${n}`,
      description: null,
      status: 'open',
      severity_likelihood: n % 3 === 0 ? null : 2,
      severity_impact: 3,
      location: null,
      incident_date: '2025-01-01',
      created_at: `2025-01-01T00:00:0${n}.000Z`,
      updated_at: `2025-01-01T00:00:0${n}.000Z`,
      position: n,
      change_seq: n,
      changed_at: '2025-01-02T00:00:00.000Z',
      created_seq: n,
      ...extra,
    });

    before(async () => {
      database = await createTestDatabase(store);
      handle = openDatabase(database.url);
      await migrateToLatest(handle.db);
      await accountRepository.upsertMany(
        handle.db,
        [{ id: accountId, name: 'Acme', api_access: 1, rate_limit_per_hour: 100 }],
        new Date().toISOString(),
      );
    });
    after(async () => {
      await handle.destroy();
      await database.drop();
    });

    const stored = () =>
      handle.db
        .selectFrom('incidents')
        .selectAll()
        .where('account_id', '=', accountId)
        .orderBy('position')
        .execute();

    test('adds new incidents with every column as given', async () => {
      const rows = [incident(1, { description: 'tab\tand \\ backslash\nline' }), incident(2), incident(3)];
      await incidentRepository.insertNew(handle.db, rows);
      assert.deepEqual(await stored(), rows);
    });

    test('an id already stored: IncidentExistsError, and the transaction that tried adds nothing', async () => {
      const [first] = await stored();
      const attempt = handle.db
        .transaction()
        .execute((trx) =>
          incidentRepository.insertNew(trx, [incident(4), { ...incident(5), id: first!.id }]),
        );
      await assert.rejects(attempt, IncidentExistsError);
      assert.equal((await stored()).length, 3);
    });
  });
}
