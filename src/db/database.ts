import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect } from 'kysely';
import pg from 'pg';
import type { Database } from './schema.ts';

export type Store = 'sqlite' | 'postgres';

export interface DatabaseHandle {
  db: Kysely<Database>;
  store: Store;
  destroy(): Promise<void>;
}

// COUNT(*) and SUM() come back as int8; every count here fits a double exactly.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

export function storeOf(databaseUrl: string): Store {
  return databaseUrl.startsWith('sqlite:') ? 'sqlite' : 'postgres';
}

function openSqlite(databaseUrl: string): Kysely<Database> {
  const path = databaseUrl.slice('sqlite:'.length);
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const sqlite = new SqliteDatabase(path);
  // WAL lets the CLI write while the server reads; busy_timeout makes writers queue, not fail.
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('busy_timeout = 5000');
  sqlite.pragma('foreign_keys = ON');
  return new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
}

function openPostgres(databaseUrl: string): Kysely<Database> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 10 });
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
}

/** Opens the store that DATABASE_URL names: `sqlite:PATH` or `postgres://…`. */
export function openDatabase(databaseUrl: string): DatabaseHandle {
  const store = storeOf(databaseUrl);
  const db = store === 'sqlite' ? openSqlite(databaseUrl) : openPostgres(databaseUrl);
  return { db, store, destroy: () => db.destroy() };
}
