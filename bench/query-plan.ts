import {
  CompiledQuery,
  type KyselyPlugin,
  type QueryResult,
  type RootOperationNode,
  type UnknownRow,
} from 'kysely';
import { DEMO_ACCOUNT_ID } from '../src/demo/demo-data.ts';
import { openDatabase } from '../src/db/database.ts';
import { cacheBudgets, DEFAULT_CACHE_MAX_MB } from '../src/config.ts';
import { IncidentService } from '../src/services/incident-service.ts';

/** One statement a page of incidents ran, and SQLite's plan for it with the same parameters. */
export interface PlannedQuery {
  sql: string;
  parameters: readonly unknown[];
  plan: string[];
}

/**
 * The statements that reading the incidents at `offset`…`offset + limit − 1` of the demo account
 * runs, exactly as the list endpoints run them (IncidentService.listNewestFirst, with its real
 * parameters, on a fresh rank map), each with its EXPLAIN QUERY PLAN. SQLite only.
 */
export async function pagePlans(databaseUrl: string, offset: number, limit: number): Promise<PlannedQuery[]> {
  const handle = openDatabase(databaseUrl);
  try {
    const executor = handle.db.getExecutor();
    const ran: CompiledQuery[] = [];
    const capture: KyselyPlugin = {
      transformQuery({ node, queryId }): RootOperationNode {
        ran.push(executor.compileQuery(node, queryId));
        return node;
      },
      async transformResult({ result }): Promise<QueryResult<UnknownRow>> {
        return result;
      },
    };
    const rankMapBytes = cacheBudgets(DEFAULT_CACHE_MAX_MB).rankMaps;
    const totals = await new IncidentService(handle.db, rankMapBytes).totals(DEMO_ACCOUNT_ID);
    await new IncidentService(handle.db.withPlugin(capture), rankMapBytes).listNewestFirst(
      DEMO_ACCOUNT_ID,
      totals,
      offset,
      limit,
    );
    const plans: PlannedQuery[] = [];
    for (const query of ran) {
      const explained = await handle.db.executeQuery<{ detail: string }>(
        CompiledQuery.raw(`EXPLAIN QUERY PLAN ${query.sql}`, [...query.parameters]),
      );
      plans.push({ sql: query.sql, parameters: query.parameters, plan: explained.rows.map((r) => r.detail) });
    }
    return plans;
  } finally {
    await handle.destroy();
  }
}
