import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { GENERATED_FILE, generatedModels } from '../../packages/python/scripts/generate.ts';

test('the Python dataclasses are those of the OpenAPI document the server serves now', async () => {
  assert.equal(
    readFileSync(GENERATED_FILE, 'utf8'),
    await generatedModels(),
    'packages/python/src/safety_incident_api/models.py is stale: run `node packages/python/scripts/generate.ts`',
  );
});
