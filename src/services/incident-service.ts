import type { Kysely } from 'kysely';
import { accountRepository } from '../db/repositories/accounts.ts';
import { incidentRepository } from '../db/repositories/incidents.ts';
import type { Database } from '../db/schema.ts';
import { type Incident, toIncident } from '../schemas/public.ts';

/**
 * An account's incidents as both APIs read them. Lists are newest first and page by `position`
 * (docs/architecture.md): positions run from 1 (oldest) to the account's incident count (newest),
 * so the incident at offset i of the list has position total − i, and any page, however deep, is
 * one range read on the (account_id, position) index. The public API's page/limit and the wider
 * API's _start/_limit are both offsets into this one list.
 */
export const incidentService = {
  /**
   * The incidents at `offset` … `offset + limit − 1` of the account's newest-first list, which
   * holds `total` incidents (the account's `incident_count`, read with the credential or by
   * `count`); an offset past the end gives none.
   */
  async listNewestFirst(
    db: Kysely<Database>,
    accountId: string,
    total: number,
    offset: number,
    limit: number,
  ): Promise<Incident[]> {
    const highest = total - offset;
    if (highest < 1) return [];
    const lowest = Math.max(highest - limit + 1, 1);
    const rows = await incidentRepository.listByPositionRange(db, accountId, lowest, highest);
    return rows.map(toIncident);
  },

  /** The account's `incident_count`, kept by every writer of incidents: never a COUNT(*). */
  async count(db: Kysely<Database>, accountId: string): Promise<number> {
    const account = await accountRepository.findById(db, accountId);
    return account?.incident_count ?? 0;
  },

  async findById(db: Kysely<Database>, accountId: string, id: string): Promise<Incident | undefined> {
    const row = await incidentRepository.findById(db, accountId, id);
    return row === undefined ? undefined : toIncident(row);
  },
};
