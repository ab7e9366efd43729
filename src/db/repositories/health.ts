import { type Kysely, sql } from 'kysely';
import type { Database } from '../schema.ts';

export const healthRepository = {
  /**
   * The cheapest statement the store must answer itself: on the server's handle it runs under the
   * store's deadline, so a stuck or unreachable database fails it instead of hanging it.
   */
  async ping(db: Kysely<Database>): Promise<void> {
    await sql`select 1`.execute(db);
  },
};
