// `npm run docs:config`: writes the tables of the configuration from its declarations in
// src/config.ts, each between its two markers: the README's (`ENVIRONMENT`) and docs/deployment.md's
// tracing table (`TRACING`). test/config.test.ts and test/config-schema.test.ts fail when a table
// is not what this writes.
import { readFileSync, writeFileSync } from 'node:fs';
import { ENVIRONMENT, type EnvironmentVariable, TRACING, type TracingVariable } from '../src/config.ts';

export const README = new URL('../README.md', import.meta.url);
export const DEPLOYMENT = new URL('../docs/deployment.md', import.meta.url);

interface Markers {
  start: string;
  end: string;
}
const END = '<!-- end of the configuration table -->';
const README_MARKERS: Markers = {
  start: '<!-- configuration table: npm run docs:config writes it from src/config.ts -->',
  end: END,
};
export const TRACING_MARKERS: Markers = {
  start: '<!-- tracing table: npm run docs:config writes it from src/config.ts -->',
  end: END,
};

/** A variable's bounds or allowed values as a table says them, from its declaration. */
function bounds({ reading }: EnvironmentVariable | TracingVariable): string {
  if (reading.kind === 'number') return ` (${reading.min} to ${reading.max} ${reading.unit})`;
  if (reading.kind === 'whole') return ` (${reading.min} to ${reading.max})`;
  if (reading.kind === 'port') return ` (${reading.lowest} to 65535)`;
  if (reading.kind === 'choice') return `: ${reading.values.map((value) => `\`${value}\``).join(', ')}`;
  return '';
}

/** One row: the variable's name (or names), its default, what it sets with its bounds, and more. */
function row(names: readonly string[], variable: EnvironmentVariable | TracingVariable): string {
  const fallback = variable.default === null ? 'unset' : `\`${variable.default}\``;
  const meaning = [variable.doc + bounds(variable), variable.more].filter(Boolean).join('; ');
  return `| ${names.map((name) => `\`${name}\``).join(', ')} | ${fallback} | ${meaning} |`;
}

const table = (rows: string[]) => ['| Variable | Default | Meaning |', '|---|---|---|', ...rows].join('\n');

/** The README's table: one row per declared variable (one for the OpenTelemetry family), in their order. */
export function configurationTable(): string {
  return table(
    Object.entries(ENVIRONMENT).map(([name, variable]: [string, EnvironmentVariable]) =>
      row([name], variable),
    ),
  );
}

/** docs/deployment.md's tracing table: one row per OpenTelemetry variable, or pair of them. */
export function tracingTable(): string {
  return table(Object.values(TRACING).map((variable: TracingVariable) => row(variable.names, variable)));
}

/** `document` with its table replaced by `table`; throws if the markers are missing. */
export function withTable(document: string, table: string, { start, end }: Markers = README_MARKERS): string {
  const from = document.indexOf(start);
  const to = document.indexOf(end, from);
  if (from < 0 || to < from) throw new Error(`the markers of the table are missing: ${start}`);
  return `${document.slice(0, from + start.length)}\n${table}\n${document.slice(to)}`;
}

/** Every table this writes: the file, the table, its markers. */
export const TABLES = [
  { file: README, table: configurationTable, markers: README_MARKERS },
  { file: DEPLOYMENT, table: tracingTable, markers: TRACING_MARKERS },
];

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const { file, table, markers } of TABLES)
    writeFileSync(file, withTable(readFileSync(file, 'utf8'), table(), markers));
}
