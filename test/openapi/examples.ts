import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import * as oidc from 'openid-client';
import { INCIDENT_EXAMPLE } from '../../src/schemas/public.ts';
import { ROOT, seedAccount, seedIncidents, seedKey } from '../helpers.ts';
import {
  authorizationRequest,
  Browser,
  discover,
  type OauthServer,
  PASSWORD,
  REDIRECT_URI,
  seedClient,
  seedUser,
  signInAndConsent,
  startOauthServer,
} from '../oauth/harness.ts';

/**
 * Runs the reference's examples as a reader would: the `sh` ones in a shell, the TypeScript ones
 * type-checked with `tsc --strict` and run with Node, in an empty folder, against a real server on
 * the document's own base URL, with the credentials they read from the environment. Used by
 * guides.test.ts and code-samples.test.ts.
 */

const run = promisify(execFile);
const NOW = '2026-01-01T00:00:00.000Z';

/** The SDK as an integrator imports it; here, its sources. */
const SDK_PACKAGE = '@safety-incident/sdk';
const SDK_SOURCES = join(ROOT, 'packages/sdk/src/index.ts');
/** Where, in an example's folder, the `curl` that fails on an error status lies (`runShell`). */
const BIN = '.bin';

export interface ExampleServer {
  server: OauthServer;
  /** The variables the examples read: every credential they need, valid on `server`. */
  env: Record<string, string>;
  /**
   * A new grant in `env` (`ACCESS_TOKEN`, `REFRESH_TOKEN`), the person approving again: for a run
   * of examples after one that spent the refresh token or revoked the grant.
   */
  renewTokens(): Promise<void>;
  /** An empty folder of its own, where the examples run and write their files. */
  dir: string;
  close(): Promise<void>;
}

/**
 * A server on SQLite (the examples read no store-specific behaviour) holding an account with an
 * API key, the incident the samples name, a user who approved an OAuth client, and that
 * client's tokens.
 */
export async function startExampleServer(): Promise<ExampleServer> {
  const server = await startOauthServer('sqlite');
  const { db } = server.ctx;
  const accountId = await seedAccount(db, { rate_limit_per_hour: 100_000 });
  const { rawKey } = await seedKey(db, accountId);
  await seedIncidents(db, accountId, 3, (i) => (i === 0 ? { id: INCIDENT_EXAMPLE.id } : {}));
  for (const table of ['departments', 'locations'] as const) {
    await db
      .insertInto(table)
      .values({
        id: randomUUID(),
        account_id: accountId,
        name: 'Warehouse North',
        active: 1,
        created_at: NOW,
      })
      .execute();
  }
  const user = await seedUser(db, accountId);
  const client = await seedClient(db, accountId);
  assert.ok(client.clientSecret !== null);
  const config = await discover(server, client.clientId, client.clientSecret);
  const grant = async () => {
    const { url, verifier } = await authorizationRequest(config, {
      scope: 'openid profile email users:read departments:read locations:read incidents:read',
    });
    const callback = await signInAndConsent(new Browser(server.baseUrl), url, {
      email: user.email,
      password: PASSWORD,
    });
    const tokens = await oidc.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier });
    assert.ok(tokens.refresh_token !== undefined, 'the code grant gives a refresh token');
    return { ACCESS_TOKEN: tokens.access_token, REFRESH_TOKEN: tokens.refresh_token };
  };
  const dir = mkdtempSync(join(tmpdir(), 'safety-api-examples-'));
  mkdirSync(join(dir, BIN));
  writeFileSync(join(dir, BIN, 'curl'), '#!/bin/sh\nexec /usr/bin/curl --fail-with-body "$@"\n', {
    mode: 0o755,
  });
  const env: Record<string, string> = {
    SAFETY_API_KEY: rawKey,
    ...(await grant()),
    CLIENT_ID: client.clientId,
    CLIENT_SECRET: client.clientSecret,
    REDIRECT_URI,
    CODE_CHALLENGE: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
  };
  return {
    server,
    dir,
    env,
    renewTokens: async () => {
      Object.assign(env, await grant());
    },
    close: async () => {
      rmSync(dir, { recursive: true, force: true });
      await server.close();
    },
  };
}

export interface Ran {
  stdout: string;
  stderr: string;
}

/**
 * Runs a shell example in `dir` with `env`. Its `curl` fails on an HTTP error status
 * (`--fail-with-body`, added by a `curl` first on the PATH), so exit status 0 means that every
 * request it made was answered with success.
 */
export async function runShell(example: string, { dir, env }: ExampleServer): Promise<Ran> {
  return run('/bin/sh', ['-c', example], {
    cwd: dir,
    env: { ...env, PATH: `${join(dir, BIN)}:${process.env.PATH ?? ''}`, HOME: dir },
    timeout: 30_000,
  }).catch((error: { stdout?: string; stderr?: string; code?: number }) =>
    assert.fail(`exit ${error.code}:\n${example}\n${error.stderr ?? ''}${error.stdout ?? ''}`),
  );
}

/** The module as this test writes it: the SDK's package name pointed at its sources. */
export const fromSources = (module: string) =>
  module.replaceAll(`from '${SDK_PACKAGE}'`, `from ${JSON.stringify(SDK_SOURCES)}`);

/**
 * Type-checks TypeScript examples as a strict project of an integrator would (each one a module of
 * its own, the SDK's types from its sources), in one run of `tsc`.
 */
export async function typeCheck(
  modules: Record<string, string>,
  { dir }: Pick<ExampleServer, 'dir'>,
): Promise<void> {
  const folder = mkdtempSync(join(dir, 'typecheck-'));
  for (const [name, source] of Object.entries(modules)) writeFileSync(join(folder, `${name}.ts`), source);
  writeFileSync(
    join(folder, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        target: 'es2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        // The SDK's sources import each other with `.ts`, as its build expects.
        allowImportingTsExtensions: true,
        types: ['node'],
        typeRoots: [join(ROOT, 'node_modules/@types')],
        paths: { [SDK_PACKAGE]: [SDK_SOURCES] },
      },
      include: ['*.ts'],
    }),
  );
  writeFileSync(join(folder, 'package.json'), JSON.stringify({ type: 'module' }));
  await run(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', folder], {
    cwd: folder,
    timeout: 120_000,
  }).catch((error: { stdout?: string }) => assert.fail(`tsc --strict:\n${error.stdout ?? String(error)}`));
}

/** Runs a TypeScript example with Node (which strips the types) in `dir`, with `env`. */
export async function runTypeScript(name: string, module: string, { dir, env }: ExampleServer): Promise<Ran> {
  const file = join(dir, `${name}.ts`);
  writeFileSync(file, fromSources(module));
  return run(process.execPath, [file], { cwd: dir, env: { ...process.env, ...env }, timeout: 60_000 }).catch(
    (error: { stdout?: string; stderr?: string; code?: number }) =>
      assert.fail(`exit ${error.code}:\n${module}\n${error.stderr ?? ''}${error.stdout ?? ''}`),
  );
}

/** Where one module's output ends and the next one's begins, in `runTypeScriptModules`. */
const MODULE_MARK = '\u0000module ';

/**
 * Runs TypeScript examples one after another in one Node process, each imported as the module it
 * is, so that the SDK's sources are loaded once rather than once an example; returns each one's
 * output, in order. An example that throws ends the run, failing with its name and output.
 */
export async function runTypeScriptModules(
  modules: Record<string, string>,
  { dir, env }: ExampleServer,
): Promise<Record<string, Ran>> {
  const folder = mkdtempSync(join(dir, 'modules-'));
  const names = Object.keys(modules);
  for (const name of names) writeFileSync(join(folder, `${name}.ts`), fromSources(modules[name] ?? ''));
  const runner = join(folder, 'run-all.mjs');
  writeFileSync(
    runner,
    `for (const name of ${JSON.stringify(names)}) {
  for (const stream of [process.stdout, process.stderr]) stream.write(${JSON.stringify(MODULE_MARK)} + name + '\\n');
  await import(\`./\${name}.ts\`);
}\n`,
  );
  const outputOf = (text: string) =>
    Object.fromEntries(
      text
        .split(MODULE_MARK)
        .slice(1)
        .map((part) => [part.slice(0, part.indexOf('\n')), part.slice(part.indexOf('\n') + 1)]),
    ) as Record<string, string>;
  const { stdout, stderr } = await run(process.execPath, [runner], {
    cwd: dir,
    env: { ...process.env, ...env },
    timeout: 180_000,
  }).catch((error: { stdout?: string; stderr?: string; code?: number }) => {
    const failed = Object.keys(outputOf(error.stdout ?? '')).at(-1) ?? '';
    return assert.fail(
      `${failed}: exit ${error.code}:\n${modules[failed] ?? ''}\n${outputOf(error.stderr ?? '')[failed] ?? error.stderr ?? ''}${outputOf(error.stdout ?? '')[failed] ?? ''}`,
    );
  });
  const out = outputOf(stdout);
  const err = outputOf(stderr);
  return Object.fromEntries(
    names.map((name) => [name, { stdout: out[name] ?? '', stderr: err[name] ?? '' }]),
  );
}

/** The fenced code blocks of a Markdown text, with their language, in order. */
export function codeBlocks(markdown: string): { language: string; code: string }[] {
  return [...markdown.matchAll(/^```(\w*)\n([\s\S]*?)\n```$/gm)].map(([, language = '', code = '']) => ({
    language,
    code,
  }));
}
