// One migrated database per store for a test run, made by the real `safety-api migrate`:
// `createTestContext` (test/helpers.ts) copies it instead of migrating a new database each time
// (a PostgreSQL CREATE DATABASE … TEMPLATE, a SQLite file copy). Named after the run, dropped at
// its end, so concurrent runs never share one. Without it (a test file run by `node --test`
// alone), each context migrates its own database as before.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

const ADMIN_PG_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

function migrate(databaseUrl) {
  const result = spawnSync(process.execPath, ['bin/safety-api.js', 'migrate'], {
    env: { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent' },
    encoding: 'utf8',
  });
  if (result.status !== 0)
    throw new Error(
      `migrating the test template failed: ${result.error?.message ?? ''}${result.stderr}${result.stdout}`,
    );
}

async function admin(sql) {
  const client = new pg.Client({ connectionString: ADMIN_PG_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** Makes the templates of `stores`; returns the environment naming them and how to drop them. */
export async function createTemplates(stores) {
  const env = {};
  const drops = [];
  if (stores.includes('sqlite')) {
    const dir = mkdtempSync(join(tmpdir(), 'safety-api-template-'));
    drops.push(async () => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'template.db');
    migrate(`sqlite:${path}`);
    env.TEST_TEMPLATE_SQLITE = path;
  }
  if (stores.includes('postgres')) {
    const name = `safety_template_${process.pid}_${Date.now().toString(36)}`;
    await admin(`CREATE DATABASE ${name}`);
    drops.push(() => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    const url = new URL(ADMIN_PG_URL);
    url.pathname = `/${name}`;
    migrate(url.toString());
    env.TEST_TEMPLATE_POSTGRES = name;
  }
  return {
    env,
    drop: async () => {
      for (const drop of drops) await drop();
    },
  };
}
