import { get } from 'node:http';
import { parseArgs } from 'node:util';
import { loadConfig } from '../config.ts';
import type { Command } from './command.ts';

/**
 * Docker's HEALTHCHECK and an orchestrator's exec probe run this in images without curl. A server
 * that does not answer (stopped, or frozen with its port still open) must count as a failure, not
 * hang the probe: the whole command, its own start included, ends within this.
 */
const ANSWER_WITHIN_MS = 2000;
/** What `--timeout` may ask for, in seconds: an exec probe's own timeout is rarely more. */
const MAX_TIMEOUT_SECONDS = 60;
/** Kept for writing the line and exiting, after the request gave up. */
const EXIT_MARGIN_MS = 150;
/** What the request is given at least, when starting the command took most of the budget. */
const MIN_REQUEST_MS = 250;
/** Enough of a probe's body for the failure line (it is a few dozen bytes of JSON). */
const MAX_BODY_BYTES = 512;

/** The address a probe on the same machine reaches a server bound to `host` at. */
function localAddress(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '::1';
  return host;
}

function request(
  host: string,
  port: number,
  path: string,
  ms: number,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = get(
      // No keep-alive agent: the process exits as soon as the answer is read.
      { host, port, path, agent: false, headers: { connection: 'close' }, signal: AbortSignal.timeout(ms) },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (body.length < MAX_BODY_BYTES) body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: body.slice(0, MAX_BODY_BYTES) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
  });
}

/** `--timeout`'s seconds (a whole or decimal number above 0, at most MAX_TIMEOUT_SECONDS) in ms. */
function timeoutMs(text: string): number {
  const seconds = /^\d+(\.\d+)?$/.test(text) ? Number(text) : Number.NaN;
  if (!(seconds > 0 && seconds <= MAX_TIMEOUT_SECONDS))
    throw new Error(
      `--timeout must be a number of seconds above 0 and at most ${MAX_TIMEOUT_SECONDS}, not "${text}"`,
    );
  return seconds * 1000;
}

/** Asks the server; resolves when it answered 200, throws with the one line to print otherwise. */
async function probe(args: string[]): Promise<void> {
  // Every failure, a bad PORT or option included, exits 1: Docker reserves exit code 2.
  let path: string;
  let host: string;
  let port: number;
  let withinMs: number;
  try {
    const { values } = parseArgs({
      args,
      options: { live: { type: 'boolean', default: false }, timeout: { type: 'string' } },
    });
    path = values.live ? '/healthz' : '/readyz';
    withinMs = values.timeout === undefined ? ANSWER_WITHIN_MS : timeoutMs(values.timeout);
    const config = loadConfig();
    host = localAddress(config.host);
    port = config.port;
  } catch (error) {
    throw new Error(`healthcheck: ${error instanceof Error ? error.message : String(error)}`);
  }
  const where = `${path} on ${host.includes(':') ? `[${host}]` : host}:${port}`;
  // performance.now() counts from the process's start: the budget covers loading the CLI too.
  const ms = Math.round(Math.max(withinMs - EXIT_MARGIN_MS - performance.now(), MIN_REQUEST_MS));
  let answer: { status: number; body: string };
  try {
    answer = await request(host, port, path, ms);
  } catch (error) {
    const reason =
      error instanceof Error && error.name === 'AbortError'
        ? `no answer within ${withinMs / 1000} s`
        : `not reachable: ${error instanceof Error ? error.message : String(error)}`;
    throw new Error(`${where}: ${reason}`);
  }
  if (answer.status !== 200) {
    const body = answer.body.replace(/\s+/g, ' ').trim();
    throw new Error(`${where} answered ${answer.status}${body === '' ? '' : `: ${body}`}`);
  }
}

/** Its help, and the in-process path (`main`); the executable runs `healthcheck` below instead. */
export const healthcheckCommand: Command = {
  name: 'healthcheck',
  summary: "Ask the local server's /readyz (or /healthz): exit 0 when it answers 200, 1 otherwise",
  usage: ['safety-api healthcheck [--live] [--timeout SECONDS]'],
  notes: [
    '--live asks /healthz (the process is up) instead of /readyz (it can serve: the database answers).',
    'The server is found at PORT and HOST from the environment (HOST 0.0.0.0 is asked on 127.0.0.1).',
    `Prints nothing on success and one line on failure; a server that does not answer fails within ${ANSWER_WITHIN_MS / 1000} s,`,
    `its own start included, or within --timeout SECONDS (at most ${MAX_TIMEOUT_SECONDS}): set it below the probe's own timeout.`,
  ],
  example: 'safety-api healthcheck --live',
  run: (args) => probe(args),
};

/**
 * The entry of the bundle's healthcheck.js, which bin/safety-api.js runs for `safety-api
 * healthcheck`: loading the whole CLI takes over a second on a busy machine, this a fifth of that,
 * and a probe must end within its timeout. Returns the exit code; a failure is one line on
 * standard error, as `main` writes it.
 */
export async function healthcheck(args: string[]): Promise<number> {
  try {
    await probe(args);
    return 0;
  } catch (error) {
    process.stderr.write(`safety-api: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}
