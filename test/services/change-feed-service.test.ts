import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import {
  CompiledQuery,
  type KyselyPlugin,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RootOperationNode,
  sql,
  type UnknownRow,
} from 'kysely';
import { type DatabaseHandle, openDatabase } from '../../src/db/database.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import { ChangeFeedService } from '../../src/services/change-feed-service.ts';
import { createTestDatabase, STORES, seedAccount, seedIncidents, type TestDatabase } from '../helpers.ts';

/** Keeps every query a Kysely instance runs, to be compiled and explained afterwards. */
class QueryCapture implements KyselyPlugin {
  readonly queries: { node: RootOperationNode; queryId: PluginTransformQueryArgs['queryId'] }[] = [];

  transformQuery({ node, queryId }: PluginTransformQueryArgs): RootOperationNode {
    this.queries.push({ node, queryId });
    return node;
  }

  async transformResult({ result }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return result;
  }
}

const FEED_TABLES = /\b(incidents|incident_tombstones|users|departments|locations)\b/;

for (const store of STORES) {
  describe(`changes feed service (${store})`, () => {
    let database: TestDatabase;
    let handle: DatabaseHandle;
    let accountId: string;

    before(async () => {
      database = await createTestDatabase(store);
      handle = openDatabase(database.url);
      await migrateToLatest(handle.db);
      accountId = await seedAccount(handle.db);
      await seedIncidents(handle.db, accountId, 50);
      await handle.db
        .insertInto('departments')
        .values({
          id: randomUUID(),
          account_id: accountId,
          name: 'Ops',
          active: 1,
          created_at: '2025-01-01T00:00:00.000Z',
        })
        .execute();
    });
    after(async () => {
      await handle.destroy();
      await database.drop();
    });

    test('each table of a page is one range read on its (account_id, change_seq) index, with no sort', async () => {
      const capture = new QueryCapture();
      const db = handle.db.withPlugin(capture);
      await new ChangeFeedService(db).page(accountId, { cursor: undefined, limit: 10, retentionDays: 400 });

      const executor = handle.db.getExecutor();
      const reads = capture.queries
        .map(({ node, queryId }) => executor.compileQuery(node, queryId))
        .filter((query) => FEED_TABLES.test(query.sql));
      assert.equal(reads.length, 5, 'incidents, tombstones, users, departments, locations');

      for (const query of reads) {
        const table = FEED_TABLES.exec(query.sql)?.[1];
        if (store === 'sqlite') {
          const plan = await handle.db.executeQuery<{ detail: string }>(
            CompiledQuery.raw(`EXPLAIN QUERY PLAN ${query.sql}`, [...query.parameters]),
          );
          const details = plan.rows.map((row) => row.detail);
          assert.deepEqual(
            details,
            [
              `SEARCH ${table} USING INDEX ${table}_account_change (account_id=? AND change_seq>? AND change_seq<?)`,
            ],
            query.sql,
          );
        } else {
          // The planner reads a test's tiny tables whole; without that choice it shows the plan a
          // large table gets.
          const plan = await handle.db.transaction().execute(async (trx) => {
            await sql`SET LOCAL enable_seqscan = off`.execute(trx);
            return trx.executeQuery<{ 'QUERY PLAN': string }>(
              CompiledQuery.raw(`EXPLAIN ${query.sql}`, [...query.parameters]),
            );
          });
          const text = plan.rows.map((row) => row['QUERY PLAN']).join('\n');
          assert.match(text, new RegExp(`Index Scan using ${table}_account_change on ${table}`), text);
          assert.doesNotMatch(text, /Sort|Seq Scan|Bitmap/, text);
        }
      }
    });
  });
}
