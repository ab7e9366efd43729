import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, rmSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { nextPort } from '../api.ts';
import { createKey } from '../data.ts';
import { get } from '../http.ts';
import { startServer, stop } from '../processes.ts';
import { addRow, fmt, log, spread } from '../report.ts';
import { CLI, ROOT, settings, WORK } from '../settings.ts';
import { failures, type LoadResult, load } from '../wrk.ts';
import { PAGE_ONE } from './ratio.ts';

/**
 * Issue 37: page-1 CPU per request with tracing off beside the same server built without any
 * tracing code (the commit before src/telemetry/ was added, checked out and built apart), and
 * with tracing on, at the default sampler (every request traced) and at 10%, exporting by OTLP/HTTP
 * to a collector in the bench's process that takes every export and answers 200 at once.
 * The four servers run side by side on the same store and key; each round loads each in turn,
 * in an order that turns around every round.
 */

/** Tracing off must cost nothing: within the noise of the measure, taken as 5%. */
const OFF_TARGET = 1.05;

/** The commit before tracing was added, unless BENCH_TRACING_BASE names another. */
function baseCommit(): string {
  const given = process.env.BENCH_TRACING_BASE;
  if (given !== undefined && given !== '') return given;
  const added = execFileSync(
    'git',
    ['log', '--format=%H', '--diff-filter=A', '--', 'src/telemetry/tracing.ts'],
    { cwd: ROOT, encoding: 'utf8' },
  )
    .trim()
    .split('\n')
    .at(-1);
  if (added === undefined || added === '') throw new Error('no commit adds src/telemetry/tracing.ts');
  return `${added}^`;
}

/** The base commit checked out into WORK and built (its own dist/), with this checkout's packages. */
function buildBase(): { cli: string; remove(): void } {
  const commit = baseCommit();
  const dir = join(WORK, 'without-tracing');
  log(`building ${commit} (without tracing) in ${dir}`);
  execFileSync('git', ['worktree', 'add', '--detach', dir, commit], { cwd: ROOT, stdio: 'ignore' });
  const remove = () => {
    execFileSync('git', ['worktree', 'remove', '--force', dir], { cwd: ROOT, stdio: 'ignore' });
  };
  try {
    if (!existsSync(join(dir, 'node_modules')))
      symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
    execFileSync(process.execPath, [join(dir, 'scripts/build.mjs')], { cwd: dir, stdio: 'inherit' });
  } catch (error) {
    remove();
    throw error;
  }
  return { cli: join(dir, 'bin/safety-api.js'), remove };
}

/** A collector that reads every export and answers 200: what a healthy one costs the server. */
async function sinkCollector() {
  let exports = 0;
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      exports += 1;
      response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    exports: () => exports,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

interface Variant {
  name: string;
  cli: string;
  env: Record<string, string>;
  runs: LoadResult[];
}

export async function tracingOverhead(label: string, env: Record<string, string>): Promise<void> {
  const auth = await createKey(`bench tracing ${label}`, env);
  const base = buildBase();
  const collector = await sinkCollector();
  const otlp = { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url };
  const variants: Variant[] = [
    { name: 'without tracing code', cli: base.cli, env: {}, runs: [] },
    { name: 'tracing off', cli: CLI, env: {}, runs: [] },
    { name: 'tracing on, every request', cli: CLI, env: otlp, runs: [] },
    {
      name: 'tracing on, 10%',
      cli: CLI,
      env: { ...otlp, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1' },
      runs: [],
    },
  ];
  const servers: { child: Awaited<ReturnType<typeof startServer>>; port: number }[] = [];
  try {
    for (const variant of variants) {
      const port = nextPort();
      const child = await startServer(
        [...settings.serverNodeOptions, variant.cli, 'serve'],
        { ...env, ...variant.env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
        async () => (await get(port, PAGE_ONE, auth)).status === 200,
      );
      servers.push({ child, port });
    }
    log(
      `${label}: page 1, ${variants.map((v) => v.name).join(' / ')}, ${settings.seconds} s each, ${settings.rounds} rounds`,
    );
    for (const { child, port } of servers) await load(child.pid, port, PAGE_ONE, auth, { seconds: 1 });
    for (let round = 0; round < settings.rounds; round += 1) {
      const order = variants.map((_, i) => i);
      if (round % 2 === 1) order.reverse();
      for (const i of order) {
        const { child, port } = servers[i] as (typeof servers)[number];
        (variants[i] as Variant).runs.push(await load(child.pid, port, PAGE_ONE, auth));
      }
    }
  } finally {
    for (const { child } of servers) await stop(child);
    await collector.close();
    base.remove();
  }

  // The least CPU per request of each: the round the machine's neighbours disturbed least.
  const cpu = (variant: Variant) => Math.min(...variant.runs.map((run) => run.cpuUsPerRequest));
  const [without, off, on, tenth] = variants as [Variant, Variant, Variant, Variant];
  const failed = failures(variants.flatMap((variant) => variant.runs));
  const rounds = (variant: Variant) =>
    `${spread(variant.runs.map((run) => run.cpuUsPerRequest))} µs, ${spread(variant.runs.map((run) => run.rps))} req/s`;
  const row = (variant: Variant, target: string, pass: boolean | null) =>
    addRow({
      measurement: `${label}: page 1 CPU per request, ${variant.name} vs without tracing code, least of ${settings.rounds}`,
      result:
        `${fmt(cpu(variant), 1)} vs ${fmt(cpu(without), 1)} µs = ${fmt((cpu(variant) / cpu(without)) * 100)}% ` +
        `(rounds: ${rounds(variant)}; without: ${rounds(without)}${failed > 0 ? `; ${failed} failed requests!` : ''})`,
      target,
      pass,
    });
  row(off, `<= ${fmt(OFF_TARGET * 100)}% (noise)`, failed === 0 && cpu(off) <= OFF_TARGET * cpu(without));
  row(on, 'report', failed === 0 ? null : false);
  row(tenth, 'report', failed === 0 ? null : false);
  addRow({
    measurement: `${label}: exports received by the collector while tracing was on`,
    result: fmt(collector.exports()),
    target: '> 0',
    pass: collector.exports() > 0,
  });
  rmSync(join(WORK, 'without-tracing'), { recursive: true, force: true });
}
