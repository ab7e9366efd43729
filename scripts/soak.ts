// `npm run soak -- [--store postgres|sqlite] [--minutes N]`: the soak of test/faults/soak.ts for as
// long as asked (default: PostgreSQL with Redis, 15 minutes), with a line per fault and import, then
// what it counted and every promise it saw broken. Exits 1 if any was. It starts its own Redis and
// creates its own database, like the tests (README, "Tests and checks").
import { parseArgs } from 'node:util';
import type { StoreName } from '../src/db/database.ts';
import { runSoak } from '../test/faults/soak.ts';

const { values } = parseArgs({
  options: { store: { type: 'string', default: 'postgres' }, minutes: { type: 'string', default: '15' } },
});
const store = values.store;
const minutes = Number(values.minutes);
if ((store !== 'postgres' && store !== 'sqlite') || !(minutes > 0)) {
  console.error('usage: npm run soak -- [--store postgres|sqlite] [--minutes N]');
  process.exit(2);
}
const chosen: StoreName = store;
console.log(`soak: ${chosen}, ${minutes} min`);
const { violations, counts } = await runSoak({
  store: chosen,
  durationMs: minutes * 60_000,
  clients: 8,
  progress: (line) => console.log(line),
});
console.log(JSON.stringify(counts, null, 2));
for (const violation of violations) console.log(`broken: ${violation}`);
console.log(
  violations.length === 0 ? 'soak: every promise held' : `soak: ${violations.length} promises broken`,
);
process.exit(violations.length === 0 ? 0 : 1);
