import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { writeNdjson } from '../../src/demo/demo-data.ts';
import { createTestDatabase, ROOT, STORES } from '../helpers.ts';

/**
 * Issue 39: a file newest first (the order of the lists and of every export) is placed downwards
 * as it is read. A shuffled one makes the import re-rank every incident it brought on SQLite, and
 * on PostgreSQL read the file twice, the second time for its keys alone, which PostgreSQL ranks
 * before anything is written. On SQLite that re-ranking once sorted the keys and journaled every
 * page it changed in memory: a million incidents newest first peaked at 915 MB. Here a file of
 * wide incidents (about 170 MB of rows) in each order must stay under the 256 MB README promises
 * whatever the file's size; held in memory, the re-ranking's journal, or the file's keys, would
 * pass that. Not timed: the peak resident set of the whole CLI run, from GNU time.
 */

const GNU_TIME = '/usr/bin/time';
const INCIDENTS = 40_000;
const RSS_LIMIT_MB = 256;

const dir = mkdtempSync(join(tmpdir(), 'safety-import-memory-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Runs `safety-api import file` under GNU time; its exit code, stderr and peak RSS in MB. */
async function importMeasured(file: string, databaseUrl: string) {
  const child = spawn(
    GNU_TIME,
    ['-f', 'peak-rss-kb %M', process.execPath, join(ROOT, 'bin/safety-api.js'), 'import', file],
    {
      cwd: ROOT,
      env: { ...process.env, LOG_LEVEL: 'silent', DATABASE_URL: databaseUrl },
    },
  );
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  child.stdout.resume();
  const [code] = (await once(child, 'close')) as [number];
  const kb = Number(/peak-rss-kb (\d+)/.exec(stderr)?.[1] ?? Number.NaN);
  return { code, stderr, rssMb: kb / 1024 };
}

for (const store of STORES) {
  describe(
    `safety-api import: memory whatever the order (${store})`,
    { skip: !existsSync(GNU_TIME) && 'no GNU time' },
    () => {
      /** An account and INCIDENTS wide incidents, in `order` (indexes into creation order). */
      async function wideFile(name: string, order: (count: number) => number[]) {
        const accountId = randomUUID();
        const file = join(dir, name);
        const start = Date.UTC(2024, 0, 1);
        const text = 'The forklift reversed into the racking; nobody was hurt. '.repeat(70);
        function* records() {
          yield { type: 'account', id: accountId, name: 'Wide', api_access: true, rate_limit_per_hour: 1000 };
          for (const i of order(INCIDENTS)) {
            const createdAt = new Date(start + i * 60_000).toISOString();
            yield {
              type: 'incident',
              id: randomUUID(),
              account_id: accountId,
              incident_number: `INC-2024-${i + 1}`,
              description: `${text}${i}`,
              status: 'open',
              severity_likelihood: i % 101,
              severity_impact: (i * 7) % 101,
              location: 'Plant A, line 2',
              incident_date: createdAt.slice(0, 10),
              created_at: createdAt,
              updated_at: createdAt,
            };
          }
        }
        await writeNdjson(file, records());
        return file;
      }

      const orders = {
        'newest first': (count: number) => Array.from({ length: count }, (_, i) => count - 1 - i),
        // Each index once, scattered (a stride prime to the count): out of order from the start.
        shuffled: (count: number) => Array.from({ length: count }, (_, i) => (i * 7919) % count),
      };
      for (const [order, indexes] of Object.entries(orders)) {
        test(`a file of wide incidents ${order} peaks below 256 MB`, async (t) => {
          const file = await wideFile(`${store}-${order}.ndjson`, indexes);
          const database = await createTestDatabase(store, { migrated: true });
          const result = await importMeasured(file, database.url).finally(() => database.drop());
          rmSync(file);
          assert.equal(result.code, 0, result.stderr);
          t.diagnostic(`peak RSS ${result.rssMb.toFixed(0)} MB`);
          assert.ok(
            result.rssMb < RSS_LIMIT_MB,
            `peak RSS ${result.rssMb.toFixed(0)} MB, over ${RSS_LIMIT_MB} MB`,
          );
        });
      }
    },
  );
}
