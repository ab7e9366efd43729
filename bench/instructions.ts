import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { type Api, nextPort, startApi } from './api.ts';
import { get } from './http.ts';
import { startServer, stop, which } from './processes.ts';
import { addRow, fmt, log } from './report.ts';
import { PAGE_ONE } from './scenarios/ratio.ts';
import { WORK } from './settings.ts';

/** Requests before counting starts, so that V8 has optimised the hot path. */
const WARM_UP_REQUESTS = 4000;
/** Requests counted. */
const COUNTED_REQUESTS = 1500;
/** Requests in flight at once, each on a kept-alive connection of its own. */
const CONCURRENCY = 4;

/**
 * `count` GETs of `path`, `CONCURRENCY` at a time on kept-alive connections; throws unless every
 * one answered 200. Not wrk: a server under valgrind answers a few hundred requests a second.
 */
async function requests(port: number, path: string, headers: Record<string, string>, count: number) {
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  let started = 0;
  const one = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path, headers, agent }, (res) => {
        if (res.statusCode !== 200) reject(new Error(`${path} answered ${res.statusCode}`));
        res.resume();
        res.on('end', resolve);
      });
      req.on('error', reject);
      req.end();
    });
  const worker = async () => {
    while (started < count) {
      started += 1;
      await one();
    }
  };
  try {
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  } finally {
    agent.destroy();
  }
}

/**
 * What valgrind and callgrind_control name their pipe after, set alike for both so that they find
 * each other (HOST is also the address the API listens on).
 */
const VALGRIND_ENV = { USER: userInfo().username, LOGNAME: userInfo().username, HOST: '127.0.0.1' };

/**
 * The user-space instructions per page-1 request of a server already running under callgrind with
 * instrumentation off: warmed up, then counted over `COUNTED_REQUESTS`, then stopped.
 */
async function countInstructions(server: Api, outDir: string): Promise<number> {
  const control = (...args: string[]) =>
    execFileSync('callgrind_control', [...args, String(server.pid)], {
      env: { ...process.env, ...VALGRIND_ENV },
      stdio: 'ignore',
    });
  try {
    await requests(server.port, PAGE_ONE, server.auth, WARM_UP_REQUESTS);
    control('--instr=on');
    await requests(server.port, PAGE_ONE, server.auth, COUNTED_REQUESTS);
    control('--instr=off');
    control('--dump');
  } finally {
    await stop(server.process);
  }
  const dump = readdirSync(outDir).find((name) => name.endsWith('.1'));
  if (dump === undefined) throw new Error(`callgrind wrote no dump to ${outDir}`);
  const totals = /^totals: (\d+)/m.exec(readFileSync(join(outDir, dump), 'utf8'));
  if (totals === null) throw new Error(`no totals in ${dump}`);
  return Number(totals[1]) / COUNTED_REQUESTS;
}

/**
 * Page 1's user-space instructions per request, API against the bare server, each counted by
 * valgrind's callgrind in a run of its own. An instruction count does not move with the load of
 * the machine's neighbours, so this ratio repeats from run to run where the throughput ratio does
 * not; beside the CPU-time ratio it tells how much of the API's extra time is extra work, and how
 * much is the same work running slower (cache misses of a larger working set, the kernel's share).
 * The kernel's instructions (the socket reads and writes) are not counted. Skipped without valgrind.
 */
export async function instructionsPageOne(
  label: string,
  env: Record<string, string>,
  bareArgs: (port: number) => string[],
): Promise<void> {
  const measurement = `${label}: page 1 user-space instructions per request, API vs bare node:http (callgrind)`;
  if (which('valgrind') === null || which('callgrind_control') === null) {
    addRow({ measurement, result: 'skipped: valgrind is not installed', target: 'report', pass: null });
    return;
  }
  log(
    `${label}: page 1 under callgrind, bare node:http then the API, ${fmt(COUNTED_REQUESTS)} requests each`,
  );
  const under = (outDir: string) => [
    'valgrind',
    '--tool=callgrind',
    // V8 writes and rewrites machine code in memory: valgrind must notice.
    '--smc-check=all-non-file',
    '--instr-atstart=no',
    `--callgrind-out-file=${join(outDir, 'callgrind.out')}`,
  ];

  const bareDir = mkdtempSync(join(WORK, 'callgrind-bare-'));
  const barePort = nextPort();
  const bareProcess = await startServer(
    bareArgs(barePort),
    VALGRIND_ENV,
    async () => (await get(barePort, '/')).status === 200,
    { wrapper: under(bareDir) },
  );
  const bare = await countInstructions(
    { pid: bareProcess.pid, port: barePort, auth: {}, process: bareProcess },
    bareDir,
  );

  const apiDir = mkdtempSync(join(WORK, 'callgrind-api-'));
  const api = await countInstructions(
    await startApi(`${label} callgrind`, { ...env, ...VALGRIND_ENV }, [], { wrapper: under(apiDir) }),
    apiDir,
  );
  addRow({
    measurement,
    result: `${fmt(api)} vs ${fmt(bare)} = ${fmt(api / bare, 2)}x (${fmt(COUNTED_REQUESTS)} requests counted after ${fmt(WARM_UP_REQUESTS)}, ${CONCURRENCY} at a time)`,
    target: 'report',
    pass: null,
  });
}
