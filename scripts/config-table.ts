// `npm run docs:config`: writes the README's configuration table from the declarations in
// src/config.ts (`ENVIRONMENT`), between its two markers. test/config.test.ts fails when the
// README's table is not what this writes.
import { readFileSync, writeFileSync } from 'node:fs';
import { ENVIRONMENT, type EnvironmentVariable } from '../src/config.ts';

export const README = new URL('../README.md', import.meta.url);
const START = '<!-- configuration table: npm run docs:config writes it from src/config.ts -->';
const END = '<!-- end of the configuration table -->';

/** A variable's bounds as the table says them, from its declaration. */
function bounds({ reading }: EnvironmentVariable): string {
  if (reading.kind === 'number') return ` (${reading.min} to ${reading.max} ${reading.unit})`;
  if (reading.kind === 'port') return ` (${reading.lowest} to 65535)`;
  if (reading.kind === 'choice') return `: ${reading.values.map((value) => `\`${value}\``).join(', ')}`;
  return '';
}

/** The table: one row per declared variable, in their order. */
export function configurationTable(): string {
  const rows = Object.entries(ENVIRONMENT).map(([name, variable]: [string, EnvironmentVariable]) => {
    const fallback = variable.default === null ? 'unset' : `\`${variable.default}\``;
    const meaning = [variable.doc + bounds(variable), variable.more].filter(Boolean).join('; ');
    return `| \`${name}\` | ${fallback} | ${meaning} |`;
  });
  return ['| Variable | Default | Meaning |', '|---|---|---|', ...rows].join('\n');
}

/** The README with its table replaced by `table`; throws if the markers are missing. */
export function withTable(readme: string, table: string): string {
  const start = readme.indexOf(START);
  const end = readme.indexOf(END);
  if (start < 0 || end < start)
    throw new Error(`README.md: the markers of the configuration table are missing`);
  return `${readme.slice(0, start + START.length)}\n${table}\n${readme.slice(end)}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  writeFileSync(README, withTable(readFileSync(README, 'utf8'), configurationTable()));
}
