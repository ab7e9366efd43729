import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { freePort } from '../faults/harness.ts';
import { bearer, ROOT, runNode } from '../helpers.ts';
import { until } from '../wait.ts';
import { Receiver } from '../webhooks/receiver.ts';

/**
 * `safety-api demo` as a newcomer runs it, in a folder of its own: what it prints works when pasted,
 * the SDK quick start with its key, and a webhook endpoint on this machine.
 */
describe('safety-api demo', () => {
  let dir: string;
  let demo: ChildProcessWithoutNullStreams;
  let output = '';
  let port: number;
  let receiver: Receiver;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'safety-api-demo-'));
    port = await freePort();
    receiver = await Receiver.start();
    // Not WEBHOOKS_ALLOW_PRIVATE: the demo must allow a receiver on this machine by itself.
    const { WEBHOOKS_ALLOW_PRIVATE: _, ...env } = process.env;
    demo = spawn(process.execPath, [join(ROOT, 'bin/safety-api.js'), 'demo'], {
      cwd: dir,
      env: { ...env, PORT: String(port), LOG_LEVEL: 'info' },
    });
    demo.stdout.on('data', (chunk) => {
      output += chunk;
    });
    demo.stderr.on('data', (chunk) => {
      output += chunk;
    });
    await until(() => output.includes('Server listening'), 60_000, `the demo serving:\n${output}`);
  });

  after(async () => {
    demo.kill('SIGTERM');
    if (demo.exitCode === null && demo.signalCode === null) await once(demo, 'exit');
    await receiver.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const printed = (pattern: RegExp): string => {
    const match = pattern.exec(output);
    assert.ok(match?.[1] !== undefined, `${pattern} in:\n${output}`);
    return match[1];
  };

  test('prints the SDK quick start with its key; saved as printed, it runs and lists the demo incidents', async () => {
    const key = printed(/Demo API key \(shown once\): (svc_[0-9a-f]{40})\n/);
    const block = printed(/TypeScript SDK[^\n]*\n((?: {2}[^\n]*\n)+)/);
    const program = block.replace(/^ {2}/gm, '');
    assert.ok(program.includes(`apiKey: '${key}'`), program);
    assert.ok(program.includes(`baseUrl: 'http://localhost:${port}'`), program);
    // The package's name as a user's project resolves it, here the SDK's sources of this checkout.
    const sdk = pathToFileURL(join(ROOT, 'packages/sdk/src/index.ts')).href;
    writeFileSync(join(dir, 'quickstart.mts'), program.replace("'@safety-incident/sdk'", `'${sdk}'`));
    const run = await runNode(['quickstart.mts'], { cwd: dir });
    assert.equal(run.code, 0, run.stderr);
    const lines = run.stdout.trim().split('\n');
    assert.equal(lines[0], '600 incidents; the latest:');
    assert.equal(lines.length, 6, run.stdout);
    for (const line of lines.slice(1)) assert.match(line, /^INC-\d{4}-\d+ \w+/);
  });

  test('a webhook endpoint on this machine, made with the printed command, receives what the demo sends', async () => {
    const command = printed(/Webhooks to a receiver on this machine[^:]*: {2}([^\n]+)\n/);
    const [, assignments = '', cliArgs = ''] = /^(.*) npx safety-api (.*)$/.exec(command) ?? [];
    const env: Record<string, string> = {};
    for (const [, name = '', value = ''] of assignments.matchAll(/(\w+)=(\S+)/g)) env[name] = value;
    assert.deepEqual(env, { DATABASE_URL: 'sqlite:./data/demo.db', WEBHOOKS_ALLOW_PRIVATE: 'true' });
    // The receiver's address for the example's.
    const args = cliArgs.split(' ').map((arg) => (arg.startsWith('http://') ? receiver.url('/hooks') : arg));
    const created = await runNode([join(ROOT, 'bin/safety-api.js'), ...args, '--json'], { cwd: dir, env });
    assert.equal(created.code, 0, created.stderr);
    const { id } = JSON.parse(created.stdout) as { id: string };

    // From the feed's third change on, the demo's server sends again what followed.
    const key = printed(/Demo API key \(shown once\): (svc_[0-9a-f]{40})\n/);
    const feed = await fetch(`http://127.0.0.1:${port}/api/v1/public/changes?limit=3`, {
      headers: bearer(key),
    });
    assert.equal(feed.status, 200);
    const { data } = (await feed.json()) as { data: { next_cursor: string } };
    const resend = await runNode(
      [join(ROOT, 'bin/safety-api.js'), 'webhooks', 'resend', id, '--cursor', data.next_cursor],
      { cwd: dir, env },
    );
    assert.equal(resend.code, 0, resend.stderr);
    await receiver.waitFor(1, 30_000);
    const first = receiver.received[0];
    assert.ok(first !== undefined);
    assert.match(String(first.headers['webhook-signature']), /^v1,/);
    assert.match(first.json.type, /^(incident|user|department|location)\.(created|updated|deleted)$/);
  });
});
