import type { Readable } from 'node:stream';
import { type CompiledQuery, type Dialect, Kysely, PostgresDialect, sql } from 'kysely';
import type pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import type { Database } from '../schema.ts';
import type { SnapshotSource } from '../snapshot.ts';
import { type Store, storeDialect } from '../store.ts';
import { StoreUnavailableError } from '../store-health.ts';

/**
 * PostgreSQL: a connection of `pool` (a pool of its own, so that long exports never hold the
 * connections requests are served from) in a REPEATABLE READ transaction, whose snapshot is taken
 * at its first statement. `limits`: how long a copy may wait for PostgreSQL and for its reader
 * (`copyOut`). `store`: the store a snapshot's handle leads back to (`storeFor`), when it has one.
 */
export function postgresSnapshots(
  pool: pg.Pool,
  limits: { silentAfterMs: number; stalledAfterMs: number },
  store?: Store,
): SnapshotSource {
  return {
    async open() {
      const client = await pool.connect();
      // Kysely releases its connection after every query; this one stays checked out until the
      // snapshot ends.
      const held = {
        query: client.query.bind(client),
        release() {},
      };
      const dialect: Dialect = new PostgresDialect({
        pool: { connect: async () => held, end: async () => {} },
      });
      const db = new Kysely<Database>({
        dialect: store === undefined ? dialect : storeDialect(dialect, store),
      });
      let healthy = true;
      const release = async () => {
        if (healthy) await sql`rollback`.execute(db).catch(() => (healthy = false));
        // A connection that failed is closed rather than handed to the next snapshot. Until its
        // socket is closed it may still report an error (its server killed it meanwhile, as a
        // dropped database does): the pool no longer listens to it, so this does.
        if (!healthy) client.on('error', () => {});
        client.release(!healthy);
      };
      /**
       * The copy runs as long as the export takes, past the pool's statement_timeout: it is lifted
       * for this transaction. Two deadlines take its place: PostgreSQL must send the next rows
       * within `limits.silentAfterMs` of being asked (a frozen or stuck server), and the reader
       * must ask for more within `limits.stalledAfterMs` (the row-by-row reads have the server's
       * idle_in_transaction timeout). The protocol cannot stop a COPY TO but by closing the
       * connection: a copy not read to its end closes it rather than handing it to the next
       * snapshot.
       */
      async function* copyOut(query: CompiledQuery): AsyncGenerator<Buffer> {
        await sql`set local statement_timeout = 0`.execute(db);
        const rows: Readable = client.query(copyOutOf(query, client));
        healthy = false;
        const end = (error: Error) => () => {
          rows.destroy(error);
          client.on('error', () => {});
          client.end().catch(() => {});
        };
        const chunks = (rows as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
        let waiting = false;
        // Judged after a turn of the event loop: a loop kept busy past the limit runs its timers
        // before it reads the rows that arrived meanwhile, and those are not a silent server.
        const silent = end(
          new StoreUnavailableError(`PostgreSQL sent no rows for ${limits.silentAfterMs} ms`),
        );
        let timer: NodeJS.Timeout | null = null;
        try {
          for (;;) {
            waiting = true;
            timer = setTimeout(
              () =>
                setImmediate(() => {
                  if (waiting) silent();
                }),
              limits.silentAfterMs,
            );
            const next = await chunks.next();
            waiting = false;
            clearTimeout(timer);
            if (next.done === true) break;
            timer = setTimeout(
              end(new Error(`an export was not read for ${limits.stalledAfterMs} ms`)),
              limits.stalledAfterMs,
            );
            yield next.value;
            clearTimeout(timer);
          }
          healthy = true;
        } finally {
          waiting = false;
          if (timer !== null) clearTimeout(timer);
          if (!healthy) rows.destroy();
        }
      }
      try {
        await sql`begin isolation level repeatable read read only`.execute(db);
      } catch (error) {
        healthy = false;
        await release();
        throw error;
      }
      return { db, copyOut, release };
    },
    close: () => pool.end(),
  };
}

/**
 * `COPY (query) TO STDOUT` as pg-copy-streams submits it: a readable stream of the rows in COPY's
 * text format. Used by `copyOut` here and by the queries `PostgresStore.copiedQuery` marks (client.ts).
 */
export function copyOutOf(
  query: Pick<CompiledQuery, 'sql' | 'parameters'>,
  client: Pick<pg.Client, 'escapeLiteral'>,
): ReturnType<typeof copyTo> {
  return copyTo(`COPY (${withLiterals(query, client)}) TO STDOUT`);
}

/**
 * The statement of `query` with its parameters written in as literals: COPY takes no bind
 * parameters. Strings are escaped by the driver (`escapeLiteral`), numbers written as numbers;
 * anything else is refused. The statements given here are built by Kysely, whose SQL holds no
 * literal of its own where a `$n` could be mistaken for a parameter.
 */
function withLiterals(
  { sql: text, parameters }: Pick<CompiledQuery, 'sql' | 'parameters'>,
  client: Pick<pg.Client, 'escapeLiteral'>,
): string {
  return text.replace(/\$(\d+)/g, (_, n: string) => {
    const value = parameters[Number(n) - 1];
    if (typeof value === 'string') return client.escapeLiteral(value);
    if (typeof value === 'number' && Number.isFinite(value)) return String(value);
    throw new Error(`COPY: parameter $${n} is neither a string nor a number`);
  });
}
