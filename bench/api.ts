import type { ChildProcess } from 'node:child_process';
import { createKey } from './data.ts';
import { get } from './http.ts';
import { type StartOptions, startServer } from './processes.ts';
import { CLI } from './settings.ts';

/** A running server under test: its process, where it listens, and a key of the demo account. */
export interface Api {
  pid: number;
  port: number;
  auth: Record<string, string>;
  process: ChildProcess;
}

/** Ports of this run: one range per bench process, so that two benches on one machine do not collide. */
let lastPort = 18_000 + (process.pid % 1000) * 4;
export function nextPort(): number {
  lastPort += 1;
  return lastPort;
}

/**
 * Creates a key, then starts the real server (`safety-api serve`) on `env`'s store; `nodeOptions`
 * go to node before the executable (`--cpu-prof`); `wrapper` runs node under another program.
 */
export async function startApi(
  label: string,
  env: Record<string, string>,
  nodeOptions: string[] = [],
  { wrapper }: Pick<StartOptions, 'wrapper'> = {},
): Promise<Api> {
  const auth = await createKey(`bench ${label}`, env);
  const port = nextPort();
  const child = await startServer(
    [...nodeOptions, CLI, 'serve'],
    { ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
    async () => (await get(port, '/api/v1/public/incidents?limit=1', auth)).status === 200,
    { wrapper },
  );
  return { pid: child.pid, port, auth, process: child };
}
