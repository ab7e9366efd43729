import type { Kysely } from 'kysely';
import { accountRepository } from '../db/repositories/accounts.ts';
import { type HoleBlock, incidentRepository, POSITION_BLOCK } from '../db/repositories/incidents.ts';
import type { Database } from '../db/schema.ts';
import { ENTRY_OVERHEAD_BYTES, Lru } from '../lib/lru.ts';
import { type Incident, toIncident } from '../schemas/public.ts';

/** What paging an account's incidents needs to know: read with the credential, or by `totals`. */
export interface IncidentTotals {
  /** The account's `incident_count`. */
  total: number;
  /** The account's `data_version`: the holes in its positions are those of this version. */
  version: number;
  /**
   * The account's `created_at`: an account id erased and imported again counts its versions from
   * 0 again, under a new `created_at`, and must not meet the holes of its earlier life.
   */
  incarnation: string;
}

/**
 * Where ranks fall among positions when deletions left holes (docs/architecture.md): each block of
 * POSITION_BLOCK positions is full and dense from its start, except the blocks listed, which hold
 * `live` incidents somewhere in the block. `firstRank[i]` is the rank of the first incident of
 * `holes[i]`, `shift[i]` how many positions the holes before it take up.
 */
interface RankMap {
  holes: HoleBlock[];
  firstRank: number[];
  shift: number[];
}

function rankMap(holes: HoleBlock[]): RankMap {
  const firstRank: number[] = [];
  const shift: number[] = [];
  let missing = 0;
  for (const { block, live } of holes) {
    firstRank.push(block * POSITION_BLOCK - missing + 1);
    shift.push(missing);
    missing += POSITION_BLOCK - live;
  }
  return { holes, firstRank, shift };
}

/**
 * A rank map's bytes: per listed block, its object and two array slots. A 1M-incident account
 * with a hole in every block takes about 300 kB.
 */
const sizeOfRankMap = (map: RankMap, key: string) =>
  map.holes.length * 40 + key.length * 2 + ENTRY_OVERHEAD_BYTES;

/** The position of the incident of `rank` (1: the oldest). */
async function positionOf(
  db: Kysely<Database>,
  accountId: string,
  map: RankMap,
  rank: number,
): Promise<number> {
  // The last listed block whose first incident is at or before `rank`.
  let low = 0;
  let high = map.holes.length - 1;
  let found = -1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    if ((map.firstRank[middle] as number) <= rank) {
      found = middle;
      low = middle + 1;
    } else {
      high = middle - 1;
    }
  }
  if (found === -1) return rank;
  const { block, live } = map.holes[found] as HoleBlock;
  const nth = rank - (map.firstRank[found] as number) + 1;
  if (nth <= live) return incidentRepository.positionInBlock(db, accountId, block, nth);
  // In a full block after the listed one.
  return rank + (map.shift[found] as number) + (POSITION_BLOCK - live);
}

/**
 * An account's incidents as both APIs read them. Lists are newest first and page by `position`
 * (docs/architecture.md): positions rise from 1 (oldest), dense but for the holes deletions left,
 * which are counted per block. The incident at offset i of the list has rank total − i; its
 * position is the rank itself without holes, else found from the block counts, so any page,
 * however deep, is one range read on the (account_id, position) index. The public API's
 * page/limit and the wider API's _start/_limit are both offsets into this one list.
 */
export class IncidentService {
  private readonly db: Kysely<Database>;
  /** The rank maps of this database, by account, incarnation and version. */
  private readonly rankMaps: Lru<string, RankMap>;

  /** `rankMapBytes`: what the rank maps may take (CACHE_MAX_MB's share, `cacheBudgets`). */
  constructor(db: Kysely<Database>, rankMapBytes: number) {
    this.db = db;
    this.rankMaps = new Lru(rankMapBytes, sizeOfRankMap);
  }

  /**
   * The incidents at `offset` … `offset + limit − 1` of the account's newest-first list; an
   * offset past the end gives none.
   */
  async listNewestFirst(
    accountId: string,
    totals: IncidentTotals,
    offset: number,
    limit: number,
  ): Promise<Incident[]> {
    const highest = totals.total - offset;
    if (highest < 1) return [];
    const count = Math.min(limit, highest);
    const map = await this.rankMapOf(accountId, totals);
    const top = map.holes.length === 0 ? highest : await positionOf(this.db, accountId, map, highest);
    const rows = await incidentRepository.listFromPosition(this.db, accountId, top, count);
    return rows.map(toIncident);
  }

  /** The account's `incident_count` (kept by every writer of incidents: never a COUNT(*)) and version. */
  async totals(accountId: string): Promise<IncidentTotals> {
    const account = await accountRepository.pagingState(this.db, accountId);
    return {
      total: account?.incident_count ?? 0,
      version: account?.data_version ?? 0,
      incarnation: account?.created_at ?? '',
    };
  }

  async findById(accountId: string, id: string): Promise<Incident | undefined> {
    const row = await incidentRepository.findById(this.db, accountId, id);
    return row === undefined ? undefined : toIncident(row);
  }

  private async rankMapOf(accountId: string, { version, incarnation }: IncidentTotals): Promise<RankMap> {
    const key = `${accountId}\n${incarnation}\n${version}`;
    let map = this.rankMaps.get(key);
    if (map === undefined) {
      map = rankMap(await incidentRepository.listHoleBlocks(this.db, accountId));
      this.rankMaps.set(key, map);
    }
    return map;
  }
}
