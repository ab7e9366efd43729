import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { INCIDENT_EXAMPLE } from '../../src/schemas/public.ts';
import { changeEventBody } from '../../src/webhooks/payload.ts';
import { generateSecret, signedHeaders, signingKeys } from '../../src/webhooks/signing.ts';
import { ROOT } from '../helpers.ts';
import { freePort } from '../oauth/harness.ts';
import { codeBlocks, fromSources, typeCheck } from '../openapi/examples.ts';
import { until } from '../wait.ts';

/**
 * The two webhook receivers of docs/webhooks.md ("Verifying signatures"), run as a reader would
 * paste them: the SDK's (TypeScript, type-checked with `tsc --strict`, the SDK from its sources) and
 * the `standardwebhooks` one (JavaScript). Each gets events the service's own signer signed, a
 * tampered one, and an event again.
 */

/** Each event's own cursor, which the receivers print: which events they applied, in order. */
const cursorOf = (seq: number) => `AQAAAAAEEwAAAAAEE2sGrTlx0kmCzxuCq${String(seq).padStart(4, '0')}`;

const eventBody = (seq: number) =>
  changeEventBody(
    'incident.updated',
    {
      seq,
      type: 'incident',
      op: 'upsert',
      id: INCIDENT_EXAMPLE.id,
      object: INCIDENT_EXAMPLE,
      changed_at: INCIDENT_EXAMPLE.updated_at,
      createdSeq: 1,
    },
    cursorOf(seq),
  );

const section = (() => {
  const text = readFileSync(join(ROOT, 'docs/webhooks.md'), 'utf8');
  return text.slice(text.indexOf('## Verifying signatures'), text.indexOf('## Delivery'));
})();

const receivers = codeBlocks(section).filter(({ language }) => language === 'ts' || language === 'js');

describe('the webhook receivers of docs/webhooks.md', () => {
  const dir = mkdtempSync(join(tmpdir(), 'safety-webhook-receivers-'));

  before(() => {
    // Where a reader's project has them: `standardwebhooks`, and Node's types for tsc.
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('there are two: the SDK’s verifyWebhook in TypeScript, and the standardwebhooks package', () => {
    assert.deepEqual(
      receivers.map(({ language, code }) => [
        language,
        /from '(@safety-incident\/sdk|standardwebhooks)'/.exec(code)?.[1],
      ]),
      [
        ['ts', '@safety-incident/sdk'],
        ['js', 'standardwebhooks'],
      ],
    );
  });

  test('the TypeScript receiver type-checks under tsc --strict', { timeout: 120_000 }, async () => {
    await typeCheck({ receiver: receivers[0]?.code ?? '' }, { dir });
  });

  for (const [index, name] of ['verifyWebhook', 'standardwebhooks'].entries()) {
    test(`${name}: an event the service signed is answered 204 and applied once; a tampered one 400`, async () => {
      const { language = '', code = '' } = receivers[index] ?? {};
      const file = join(dir, `receiver-${index}.${language === 'ts' ? 'ts' : 'mjs'}`);
      writeFileSync(file, fromSources(code));
      const secret = generateSecret();
      const port = await freePort();
      let stdout = '';
      let stderr = '';
      const child: ChildProcess = spawn(process.execPath, [file], {
        cwd: dir,
        env: { ...process.env, WEBHOOK_SECRET: secret, PORT: String(port) },
      });
      child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const exited = new Promise((resolve) => child.once('exit', resolve));
      try {
        const url = `http://127.0.0.1:${port}/webhooks`;
        const post = (id: string, body: string, signedBody = body) =>
          fetch(url, {
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              ...signedHeaders(id, Math.floor(Date.now() / 1000), signedBody, signingKeys([secret])),
            },
            body,
          });
        await until(
          () =>
            fetch(url).then(
              () => true,
              () => (child.exitCode === null ? false : Promise.reject(new Error(stderr))),
            ),
          30_000,
          () => `the receiver to listen on ${port} (stderr: ${stderr})`,
        );

        assert.equal((await post('msg_first', eventBody(1))).status, 204);
        const tampered = eventBody(2).replace(INCIDENT_EXAMPLE.incident_number, 'INC-0000-0000');
        assert.equal((await post('msg_tampered', tampered, eventBody(2))).status, 400);
        // The same event again is acknowledged and not applied twice; the next one is.
        assert.equal((await post('msg_first', eventBody(1))).status, 204);
        assert.equal((await post('msg_second', eventBody(3))).status, 204);
        await until(
          () => stdout.includes(cursorOf(3)),
          10_000,
          () => `the last event applied (stdout: ${stdout})`,
        );
        assert.equal(
          stdout,
          [1, 3].map((seq) => `incident.updated ${INCIDENT_EXAMPLE.id} ${cursorOf(seq)}\n`).join(''),
          'each genuine event applied once, in order',
        );
        assert.equal(stderr, '');
      } finally {
        child.kill();
        await exited;
      }
    });
  }
});
