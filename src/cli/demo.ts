import { mkdir, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { loadConfig } from '../config.ts';
import { DEMO_ACCOUNT_ID, DEMO_ADMIN_EMAIL, demoRecords, writeNdjson } from '../demo/demo-data.ts';
import { InputError } from '../errors.ts';
import { importFile } from '../import/import.ts';
import { serve } from '../server.ts';
import { apiKeyService } from '../services/api-key-service.ts';
import { userService } from '../services/user-service.ts';
import type { Io } from './command.ts';
import { withDatabase } from './context.ts';

const DEMO_DB = './data/demo.db';
const DEMO_FILE = './data/demo.ndjson';
const DEMO_PASSWORD = 'demo-password-2026';

/** Resolves when `port` can be listened on, and rejects with an InputError when it is taken. */
async function ensurePortFree(port: number, host: string): Promise<void> {
  const probe = createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        error.code === 'EADDRINUSE'
          ? new InputError(
              `port ${port} is already in use (is a demo already running?); nothing was changed. ` +
                `Stop it, or run the demo on another port: PORT=${port + 1} npm run demo`,
            )
          : error,
      ),
    );
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()));
  });
}

/** A program that reads the demo through the SDK, with the demo's address and key in it. */
export function sdkQuickStart(baseUrl: string, apiKey: string): string[] {
  return [
    "import { createClient } from '@safety-incident/sdk';",
    `const client = createClient({ baseUrl: '${baseUrl}', apiKey: '${apiKey}' });`,
    'const { data } = await client.listIncidents({ limit: 5 });',
    'console.log(`${data.pagination.total} incidents; the latest:`);',
    'for (const incident of data.data) console.log(incident.incident_number, incident.status, incident.incident_date);',
  ];
}

/**
 * `npm run demo`: a fresh demo database under ./data (its own file, whatever DATABASE_URL says, so
 * that a real database is never replaced), a demo key printed once, then the server. It prints the
 * prefix that points the other commands at the demo database.
 */
export async function demoCommand(_args: string[], io: Io): Promise<void> {
  process.env.DATABASE_URL = `sqlite:${DEMO_DB}`;
  // The demo runs on this machine by definition: its webhook endpoints may point at this machine too
  // (a receiver on localhost), unless WEBHOOKS_ALLOW_PRIVATE says otherwise.
  process.env.WEBHOOKS_ALLOW_PRIVATE ??= 'true';
  const config = loadConfig();
  // A second demo would delete the database under the running one and then fail to listen.
  await ensurePortFree(config.port, config.host);
  await mkdir('./data', { recursive: true });
  for (const suffix of ['', '-wal', '-shm']) await rm(`${DEMO_DB}${suffix}`, { force: true });
  await writeNdjson(DEMO_FILE, demoRecords({ incidents: 600 }));

  const rawKey = await withDatabase(io, async (db) => {
    const counts = await importFile(db, DEMO_FILE);
    await userService.setPassword(db, DEMO_ADMIN_EMAIL, DEMO_PASSWORD);
    io.out(
      `Demo account ${DEMO_ACCOUNT_ID}: ${counts.incident} incidents, ${counts.user} users, ` +
        `${counts.department} departments, ${counts.location} locations (${DEMO_DB}).`,
    );
    const { rawKey } = await apiKeyService.create(db, {
      accountId: DEMO_ACCOUNT_ID,
      name: 'Demo key',
      actor: 'cli',
    });
    return rawKey;
  });

  const local = `http://localhost:${config.port}`;
  const cli = `DATABASE_URL=${process.env.DATABASE_URL} npx safety-api`;
  io.out('');
  io.out(`Demo API key (shown once): ${rawKey}`);
  io.out(`Try it:  curl -s -H "Authorization: Bearer ${rawKey}" "${local}/api/v1/public/incidents?limit=5"`);
  io.out(`Admin panel: ${local}/admin  (${DEMO_ADMIN_EMAIL} / ${DEMO_PASSWORD})`);
  io.out(`Commands on the demo database:  ${cli} keys list --account ${DEMO_ACCOUNT_ID}`);
  io.out('');
  io.out('TypeScript SDK (packages/sdk): save these lines as quickstart.mts and run node quickstart.mts');
  for (const line of sdkQuickStart(local, rawKey)) io.out(`  ${line}`);
  io.out('');
  io.out(
    'Webhooks to a receiver on this machine (private addresses are allowed in the demo):  ' +
      `${cli.replace(' npx', ' WEBHOOKS_ALLOW_PRIVATE=true npx')} webhooks create --account ${DEMO_ACCOUNT_ID} ` +
      '--url http://127.0.0.1:9000/hooks',
  );
  io.out('');
  await serve(config);
}
