import type SqliteDatabase from 'better-sqlite3';
import type { SqliteDatabase as KyselySqliteDatabase, SqliteStatement } from 'kysely';
import { cacheBudgets, DEFAULT_CACHE_MAX_MB } from '../../config.ts';
import { Lru } from '../../lib/lru.ts';
import { activeTracing, inSpan } from '../../telemetry/tracing.ts';
import { currentOperation } from '../store-context.ts';

/**
 * What a prepared statement holds beyond its SQL text: better-sqlite3's object and SQLite's
 * compiled program, whose length follows the SQL's (both estimated on the high side).
 */
const STATEMENT_OVERHEAD_BYTES = 2048;
const BYTES_PER_SQL_CHARACTER = 4;

const statementBytes = (_statement: SqliteDatabase.Statement, sql: string) =>
  STATEMENT_OVERHEAD_BYTES + sql.length * BYTES_PER_SQL_CHARACTER;

/**
 * Kysely's SQLite driver prepares every query anew; compiling the SQL costs more than running an
 * indexed lookup, and the hot paths (key lookup, page reads, import batches) repeat a handful of
 * statements. A prepared statement is reusable as long as no two uses overlap, which holds here:
 * the driver runs statements synchronously and keeps the one connection locked while it streams.
 * The statements kept take at most `maxBytes` (estimated; the least recently used go first): a
 * statement whose SQL grows with its input (`IN (?, ?, …)`) cannot fill the memory.
 */
export function withStatementCache(
  sqlite: SqliteDatabase.Database,
  maxBytes = cacheBudgets(DEFAULT_CACHE_MAX_MB).sqliteStatements,
): KyselySqliteDatabase {
  const statements = new Lru<string, SqliteDatabase.Statement>(maxBytes, statementBytes);
  return {
    close: () => sqlite.close(),
    prepare(sql: string) {
      let statement = statements.get(sql);
      if (statement === undefined) {
        statement = sqlite.prepare(sql);
        statements.set(sql, statement);
      }
      return activeTracing() === null ? statement : tracedStatement(statement, sql);
    },
  };
}

/** Longest SQL text a span carries (an `IN (?, ?, …)` list of a batch can be long). */
const SPAN_SQL_CHARACTERS = 2000;

/**
 * Every statement on SQLite, whoever runs it (the server's driver, Kysely's in the command line, a
 * snapshot's), passes here: with tracing on, each run is a span, a child of the request or job it
 * serves, with the SQL (its parameters never) and the repository operation that issued it.
 */
function tracedStatement(statement: SqliteDatabase.Statement, sql: string): SqliteStatement {
  const operation = /^\s*(\w+)/.exec(sql)?.[1]?.toUpperCase() ?? 'SQL';
  const traced = <T>(work: () => T): T =>
    inSpan(
      `${operation} sqlite`,
      {
        attributes: {
          'db.system.name': 'sqlite',
          'db.operation.name': operation,
          'db.query.text': sql.slice(0, SPAN_SQL_CHARACTERS),
          ...(currentOperation() === undefined ? {} : { 'code.function.name': currentOperation() as string }),
        },
      },
      work,
    );
  return {
    reader: statement.reader,
    all: (parameters) => traced(() => statement.all(parameters)),
    run: (parameters) => traced(() => statement.run(parameters)),
    iterate: (parameters) => traced(() => statement.iterate(parameters)),
  };
}
