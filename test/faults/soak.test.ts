import assert from 'node:assert/strict';
import { test } from 'node:test';
import { STORES } from '../helpers.ts';
import { runSoak } from './soak.ts';

/**
 * The soak in small (test/faults/soak.ts): 40 s of load, imports, key cycles and webhook
 * deliveries under a fault every 5 s, on each store, then every promise checked. `npm run soak`
 * runs it for longer.
 */
for (const store of STORES) {
  test(`${store}: 40 s of faults on two instances break no promise`, { timeout: 420_000 }, async (t) => {
    const { violations, counts } = await runSoak({
      store,
      durationMs: 40_000,
      progress: (line) => t.diagnostic(line),
    });
    t.diagnostic(JSON.stringify(counts));
    for (const violation of violations) t.diagnostic(`broken: ${violation}`);
    assert.deepEqual(violations.slice(0, 20), [], `${violations.length} violations`);
    // It did what it says: faults, imports and key cycles happened, and readers were served.
    assert.ok((counts.faults ?? 0) >= (store === 'postgres' ? 7 : 3), `${counts.faults} faults`);
    assert.ok((counts.imports ?? 0) >= 4, `${counts.imports} imports`);
    assert.ok((counts['key cycles'] ?? 0) >= 2, `${counts['key cycles']} key cycles`);
    assert.ok((counts['reads by id'] ?? 0) >= 200, `${counts['reads by id']} reads by id`);
    assert.ok(
      (counts['steady: events'] ?? 0) >= 80,
      `${counts['steady: events']} events to the steady receiver`,
    );
  });
}
