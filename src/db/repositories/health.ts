import { type Kysely, sql } from 'kysely';
import type { Database } from '../schema.ts';
import { repository } from '../store-context.ts';

export const healthRepository = repository('healthRepository', {
  /**
   * The cheapest statement the store must answer itself: on the server's handle it runs under the
   * store's deadline, so a stuck or unreachable database fails it instead of hanging it.
   */
  async ping(db: Kysely<Database>): Promise<void> {
    await sql`select 1`.execute(db);
  },

  /**
   * The name the PostgreSQL server gives the database: the same for every instance on it, however
   * each one reaches it (a PgBouncer alias, another host name), so shared state in Redis can be
   * named after it.
   */
  async postgresDatabaseName(db: Kysely<Database>): Promise<string> {
    const { rows } = await sql<{ name: string }>`select current_database() as name`.execute(db);
    const row = rows[0];
    if (row === undefined) throw new Error('current_database() returned no row');
    return row.name;
  },
});
