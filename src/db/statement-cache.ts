import type SqliteDatabase from 'better-sqlite3';
import type { SqliteDatabase as KyselySqliteDatabase } from 'kysely';
import { Lru } from '../lib/lru.ts';

const STATEMENT_CACHE_SIZE = 256;

/**
 * Kysely's SQLite driver prepares every query anew; compiling the SQL costs more than running an
 * indexed lookup, and the hot paths (key lookup, page reads, import batches) repeat a handful of
 * statements. A prepared statement is reusable as long as no two uses overlap, which holds here:
 * the driver runs statements synchronously and keeps the one connection locked while it streams.
 */
export function withStatementCache(sqlite: SqliteDatabase.Database): KyselySqliteDatabase {
  const statements = new Lru<string, SqliteDatabase.Statement>(STATEMENT_CACHE_SIZE);
  return {
    close: () => sqlite.close(),
    prepare(sql: string) {
      let statement = statements.get(sql);
      if (statement === undefined) {
        statement = sqlite.prepare(sql);
        statements.set(sql, statement);
      }
      return statement;
    },
  };
}
