// Lint rules: ESLint's and typescript-eslint's recommended sets; formatting belongs to Prettier.
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/**
 * Layers point one way (docs/architecture.md): routes → services → repositories → database. For
 * each part of src/, the parts above it, which it must not import (type-only imports included, so
 * a lower layer cannot even name a type from a higher one). Names are top-level entries of src/: a
 * folder, or a module file without its `.ts`. Nothing but the executable imports the CLI.
 */
const TOP = ['app', 'server', 'observability', 'openapi', 'cli', 'runtime'];
const ABOVE_AUTH = [...TOP, 'routes', 'admin', 'oauth', 'services', 'import', 'demo'];
const ABOVE_DB = [...ABOVE_AUTH, 'auth', 'schemas'];
const LAYERS = [
  // Generic helpers: nothing from the project at all.
  { files: ['src/lib/**'], forbidden: null },
  { files: ['src/db/**'], forbidden: ABOVE_DB },
  // The loose low modules at the top of src/, which every layer may use.
  { files: ['src/{paths,config,errors,redis}.ts'], forbidden: ABOVE_DB, atTop: true },
  { files: ['src/auth/**'], forbidden: ABOVE_AUTH },
  // Webhooks, the delivery worker included, sit below the services: what the worker reads through
  // them (the feed, the signing secrets) the composition root hands it.
  { files: ['src/webhooks/**'], forbidden: ABOVE_DB },
  { files: ['src/services/**'], forbidden: [...TOP, 'routes', 'admin', 'oauth'] },
  { files: ['src/import/**'], forbidden: [...TOP, 'routes', 'admin', 'oauth'] },
  { files: ['src/demo/**'], forbidden: [...TOP, 'routes', 'admin', 'oauth'] },
  { files: ['src/schemas/**'], forbidden: [...TOP, 'routes', 'admin', 'oauth'] },
  { files: ['src/oauth/**'], forbidden: [...TOP, 'routes', 'admin'] },
  { files: ['src/admin/**'], forbidden: [...TOP, 'routes'] },
  // Routes reach the store only through services: not even a row type or a store helper.
  { files: ['src/routes/**'], forbidden: [...TOP, 'db'] },
  // The composition root builds the store, the caches, the services and the workers; the app is
  // built on it, and only the process (server.ts) and the tests open it.
  {
    files: ['src/runtime.ts'],
    forbidden: ['app', 'server', 'observability', 'openapi', 'cli', 'routes', 'admin', 'oauth'],
    atTop: true,
  },
  { files: ['src/{app,server,observability}.ts'], forbidden: ['cli'], atTop: true },
  // The OpenAPI document and /docs read what routes declare, never the routes or the store.
  {
    files: ['src/openapi/**'],
    forbidden: ['app', 'server', 'observability', 'cli', 'routes', 'services', 'db'],
  },
];

/**
 * Each store behind one interface (src/db/store.ts, docs/architecture.md "The store"): only its own
 * folder, src/db/sqlite/ or src/db/postgres/, and the one place that chooses the store
 * (src/db/database.ts) import a store's modules or its driver; everything else calls the `Store`.
 */
const STORE_FOLDERS = ['src/db/sqlite/**', 'src/db/postgres/**'];
const STORE_CHOOSER = 'src/db/database.ts';
const storeMessage =
  "a store's own modules and drivers are for src/db/sqlite/, src/db/postgres/ and src/db/database.ts: call the Store (src/db/store.ts)";
const DRIVERS = {
  sqlite: ['better-sqlite3', 'node:sqlite'],
  postgres: ['pg', 'pg-copy-streams', 'pg-cursor', 'pg-pool'],
};
/** Kysely's per-store parts: a store is told apart by calling it, never by its adapter or dialect. */
const KYSELY_STORE_PARTS = ['SqliteAdapter', 'PostgresAdapter', 'SqliteDialect', 'PostgresDialect'];
const storeImports = (drivers, folders) => ({
  paths: [
    ...drivers.map((name) => ({ name, message: storeMessage })),
    { name: 'kysely', importNames: KYSELY_STORE_PARTS, message: storeMessage },
  ],
  patterns: [{ regex: `(?:^|/)(?:${folders.join('|')})/`, message: storeMessage }],
});
const OUTSIDE_STORES = storeImports([...DRIVERS.sqlite, ...DRIVERS.postgres], ['sqlite', 'postgres']);

// Import paths are relative: from a folder under src/ they climb with `../` to reach another
// part; from a module at the top of src/ they start with `./`. Each layer's rule also holds the
// stores' (a later rule for the same files replaces an earlier one's options, it does not add to them).
const layerPattern = ({ files, forbidden, atTop }) => {
  const from = files[0].replace('/**', '');
  const message = `layers point one way: ${from} may not import this (docs/architecture.md)`;
  const regex =
    forbidden === null
      ? '^\\.\\./'
      : `^${atTop ? '\\./' : '(?:\\.\\./)+'}(?:${forbidden.join('|')})(?:/|\\.ts$)`;
  return { regex, message };
};
const layerRules = LAYERS.map((layer) => ({
  files: layer.files,
  rules: {
    'no-restricted-imports': [
      'error',
      { paths: OUTSIDE_STORES.paths, patterns: [layerPattern(layer), ...OUTSIDE_STORES.patterns] },
    ],
  },
}));
const DB_LAYER = layerPattern(LAYERS.find((layer) => layer.files[0] === 'src/db/**'));
/** Each store's folder uses its own driver and folder, never the other store's. */
const storeRules = [
  { files: ['src/db/sqlite/**'], other: 'postgres' },
  { files: ['src/db/postgres/**'], other: 'sqlite' },
].map(({ files, other }) => {
  const { paths, patterns } = storeImports(DRIVERS[other], [other]);
  return {
    files,
    rules: {
      'no-restricted-imports': [
        'error',
        { paths: paths.filter((path) => path.name !== 'kysely'), patterns: [DB_LAYER, ...patterns] },
      ],
    },
  };
});
const storeRulesEverywhere = [
  // Parts of src/ in no layer above: the stores' rule alone.
  { files: ['src/**/*.ts'], rules: { 'no-restricted-imports': ['error', OUTSIDE_STORES] } },
  // `instanceof SqliteAdapter` and its kind: the question "which store is this?" is not asked.
  {
    files: ['src/**/*.ts'],
    ignores: STORE_FOLDERS,
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: `BinaryExpression[operator='instanceof'][right.name=/^(${KYSELY_STORE_PARTS.join('|')})$/]`,
          message: storeMessage,
        },
      ],
    },
  },
];

export default tseslint.config(
  {
    ignores: [
      'node_modules/',
      'dist/',
      'data/',
      '.bench/',
      'coverage/',
      // The SDK's build output, and its types generated from the OpenAPI document.
      'packages/*/dist/',
      'packages/sdk/src/generated/',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node }, ecmaVersion: 2023, sourceType: 'module' },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      eqeqeq: ['error', 'always'],
      'no-console': 'error',
    },
  },
  {
    files: ['test/**', 'bench/**', 'scripts/**'],
    rules: { 'no-console': 'off', '@typescript-eslint/no-non-null-assertion': 'off' },
  },
  {
    // Rules that read the types: a promise nobody awaits or handles is a bug unless marked
    // `void` (with a comment saying why it may run on its own), and a promise where a callback's
    // result is ignored (an event handler, a `forEach`) loses its rejection.
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          // node:test's describe() and test() return promises the runner itself awaits.
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['describe', 'test', 'suite', 'it'] },
          ],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
    },
  },
  { files: ['src/admin/assets/**'], languageOptions: { globals: { ...globals.browser } } },
  ...storeRulesEverywhere,
  ...layerRules,
  ...storeRules,
  // The one place that chooses the store: the db layer's rule alone.
  { files: [STORE_CHOOSER], rules: { 'no-restricted-imports': ['error', { patterns: [DB_LAYER] }] } },
  prettier,
);
