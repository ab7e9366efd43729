import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { GENERATED_FILE, generatedTypes } from '../../packages/sdk/scripts/generate.ts';

test('the SDK types are those of the OpenAPI document the server serves now', async () => {
  assert.equal(
    readFileSync(GENERATED_FILE, 'utf8'),
    await generatedTypes(),
    'packages/sdk/src/generated/openapi.ts is stale: run `npm run generate -w @safety-incident/sdk`',
  );
});
