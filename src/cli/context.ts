import type { Kysely } from 'kysely';
import { loadConfig } from '../config.ts';
import { openDatabase } from '../db/database.ts';
import { migrateToLatest } from '../db/migrate.ts';
import type { Database } from '../db/schema.ts';

/** Output of a command: what it prints, so tests and the CLI share one code path. */
export interface Io {
  out(line: string): void;
  readStdin(): Promise<string>;
}

/** Runs `work` on the database DATABASE_URL names, migrated to the latest schema. */
export async function withDatabase<T>(work: (db: Kysely<Database>) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const handle = openDatabase(config.databaseUrl);
  try {
    await migrateToLatest(handle.db);
    return await work(handle.db);
  } finally {
    await handle.destroy();
  }
}
