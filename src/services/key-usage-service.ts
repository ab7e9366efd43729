import type { Kysely } from 'kysely';
import { hourOf, USAGE_RETENTION_DAYS } from '../auth/key-usage.ts';
import { apiKeyRepository } from '../db/repositories/api-keys.ts';
import { keyUsageRepository } from '../db/repositories/key-usage.ts';
import type { Database } from '../db/schema.ts';
import { InputError } from '../errors.ts';

/** Requests of one hour (ISO start of the hour), by class. */
export interface UsageHour {
  hour: string;
  ok: number;
  client_errors: number;
  rate_limited: number;
}

export type UsageTotals = Omit<UsageHour, 'hour'>;

/** What `safety-api keys usage --json` prints (docs/design.md, "Operator interface"). */
export interface UsageReport {
  key_id: string;
  hours: UsageHour[];
  totals: UsageTotals;
}

const HOUR_MS = 3600 * 1000;

function sum(hours: UsageHour[]): UsageTotals {
  const totals = { ok: 0, client_errors: 0, rate_limited: 0 };
  for (const hour of hours) {
    totals.ok += hour.ok;
    totals.client_errors += hour.client_errors;
    totals.rate_limited += hour.rate_limited;
  }
  return totals;
}

/** The first hour of the last `days` days: the current hour and the `days × 24 − 1` before it. */
function firstHour(days: number, now: Date): string {
  return hourOf(now.getTime() - (days * 24 - 1) * HOUR_MS);
}

export function parseDays(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > USAGE_RETENTION_DAYS) {
    throw new InputError(`days must be a whole number from 1 to ${USAGE_RETENTION_DAYS} (got "${value}")`);
  }
  return Number(value);
}

/** Hourly usage per key, as the recorders of every instance added it up. */
export const keyUsageService = {
  /** The key's hours with traffic in the last `days` days, oldest first, and their totals. */
  async report(
    db: Kysely<Database>,
    keyId: string,
    days: number,
    now: Date = new Date(),
  ): Promise<UsageReport> {
    if ((await apiKeyRepository.findById(db, keyId)) === undefined)
      throw new InputError(`no API key with id "${keyId}"`);
    const rows = await keyUsageRepository.listSince(db, keyId, firstHour(days, now));
    const hours = rows.map(({ hour, ok, client_errors, rate_limited }) => ({
      hour,
      ok: Number(ok),
      client_errors: Number(client_errors),
      rate_limited: Number(rate_limited),
    }));
    return { key_id: keyId, hours, totals: sum(hours) };
  },

  /**
   * The key page's view: every hour of the 30 days (those without traffic as zeros, so that a chart
   * has one slot per hour), and the totals of the last 24 hours, 7 days and 30 days.
   */
  async summary(
    db: Kysely<Database>,
    keyId: string,
    now: Date = new Date(),
  ): Promise<{ hours: UsageHour[]; totals: { day: UsageTotals; week: UsageTotals; month: UsageTotals } }> {
    const { hours: busy } = await keyUsageService.report(db, keyId, USAGE_RETENTION_DAYS, now);
    const byHour = new Map(busy.map((hour) => [hour.hour, hour]));
    const start = Date.parse(firstHour(USAGE_RETENTION_DAYS, now));
    const hours: UsageHour[] = [];
    for (let at = start; at <= now.getTime(); at += HOUR_MS) {
      const hour = new Date(at).toISOString();
      hours.push(byHour.get(hour) ?? { hour, ok: 0, client_errors: 0, rate_limited: 0 });
    }
    return {
      hours,
      totals: { day: sum(hours.slice(-24)), week: sum(hours.slice(-24 * 7)), month: sum(hours) },
    };
  },
};
