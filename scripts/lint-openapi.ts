// `npm run lint`'s last step: the OpenAPI document as the app serves it, built offline on an
// in-memory SQLite database, linted by Redocly with redocly.yaml (every finding fails).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { openRuntime } from '../src/runtime.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
// The served document names the operator's BASE_URL; a production-shaped one is linted (the
// default, localhost, is for development only).
const config = loadConfig({
  DATABASE_URL: 'sqlite::memory:',
  LOG_LEVEL: 'silent',
  BASE_URL: 'https://safety-api.invalid',
});
const runtime = await openRuntime(config, { warn: () => {}, error: () => {} });
const app = await buildApp(config, runtime);
const response = await app.inject({ url: '/openapi.json' });
await app.close();
await runtime.close();
if (response.statusCode !== 200) {
  console.error(`/openapi.json answered ${response.statusCode}`);
  process.exit(1);
}

const dir = mkdtempSync(join(tmpdir(), 'safety-api-openapi-'));
const file = join(dir, 'openapi.json');
writeFileSync(file, response.body);
const lint = spawnSync(
  join(root, 'node_modules/.bin/redocly'),
  ['lint', '--config', join(root, 'redocly.yaml'), file],
  // Offline and quiet: no usage report to Redocly, no update check.
  {
    stdio: 'inherit',
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
  },
);
rmSync(dir, { recursive: true, force: true });
process.exit(lint.status ?? 1);
