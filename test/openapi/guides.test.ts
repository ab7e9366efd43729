import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import { ERROR_CODES } from '../../src/errors.ts';
import { GUIDES } from '../../src/openapi/guides.ts';
import { DEFAULT_CHANGES_LIMIT, MAX_CHANGES_LIMIT } from '../../src/routes/public/changes.ts';
import { DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT } from '../../src/routes/public/incidents.ts';
import { DEFAULT_LIMIT, MAX_LIMIT } from '../../src/routes/wider/pagination.ts';
import { RETRY_SCHEDULE_S } from '../../src/webhooks/retry.ts';
import { DocumentCheck } from './document-check.ts';
import {
  codeBlocks,
  type ExampleServer,
  runShell,
  runTypeScript,
  startExampleServer,
  typeCheck,
} from './examples.ts';

// The guides of /openapi.json (`info.description`, which /docs shows first and lists in its
// sidebar): each there, in order, saying what the code does, with examples that run as they are.
// What Scalar makes of them in a browser is test/browser/docs.test.ts.

/** The text under each `##` heading, by heading. */
function sections(description: string): Map<string, string> {
  const found = new Map<string, string>();
  for (const part of description.split(/^## /m).slice(1)) {
    const [heading = '', ...body] = part.split('\n');
    found.set(heading, body.join('\n'));
  }
  return found;
}

describe('the guides (info.description)', () => {
  let examples: ExampleServer;
  let check: DocumentCheck;
  let guides: Map<string, string>;
  const guide = (heading: string): string => {
    const text = guides.get(heading);
    assert.ok(text !== undefined, `a guide "${heading}"`);
    return text;
  };

  before(async () => {
    examples = await startExampleServer();
    check = await DocumentCheck.of(examples.server.ctx.app);
    guides = sections(String(check.at('/info/description')));
  });
  after(() => examples.close());

  test('an overview, then one guide per subject, in order, each a top-level heading', () => {
    const description = String(check.at('/info/description'));
    assert.match(description, /^## Overview\n/, 'a heading first: no "Introduction" above the guides');
    assert.deepEqual([...guides.keys()], ['Overview', ...GUIDES]);
    assert.doesNotMatch(description, /^#{1}\s|^#{3,}\s/m, 'no other level of heading');
  });

  test('Errors: every code the API answers, with its status', () => {
    const errors = guide('Errors');
    for (const [code, { status }] of Object.entries(ERROR_CODES)) {
      assert.ok(errors.includes(`- **${status} \`${code}\`**: `), code);
    }
  });

  test('the limits the guides state are those the routes and the configuration apply', () => {
    const pagination = guide('Pagination');
    assert.ok(pagination.includes(`\`limit\` up to ${MAX_PAGE_LIMIT} (default ${DEFAULT_PAGE_LIMIT})`));
    assert.ok(pagination.includes(`a larger \`limit\` means ${MAX_PAGE_LIMIT}`));
    assert.ok(pagination.includes(`?page=1&limit=${MAX_PAGE_LIMIT}"`));
    assert.ok(
      pagination.includes(
        `\`_limit\` (default ${DEFAULT_LIMIT}, at most ${MAX_LIMIT}; a larger one means ${MAX_LIMIT})`,
      ),
    );
    assert.ok(pagination.includes(`_limit=${MAX_LIMIT}"`));
    assert.ok(DEFAULT_CHANGES_LIMIT < MAX_CHANGES_LIMIT);
    assert.ok(guide('Keeping a copy in sync').includes(`/changes?cursor=…&limit=${MAX_CHANGES_LIMIT}\``));

    const defaults = loadConfig({});
    assert.ok(
      guide('Keeping a copy in sync').includes(
        `(\`CHANGES_RETENTION_DAYS\`, ${defaults.changesRetentionDays} days unless the operator set another)`,
      ),
    );
    const webhooks = guide('Webhooks and verifying them');
    assert.ok(
      webhooks.includes(
        `within ${defaults.webhookTimeoutMs / 1000} seconds (the operator's \`WEBHOOK_TIMEOUT_MS\`)`,
      ),
    );
    assert.ok(
      webhooks.includes(
        `${defaults.webhookDisableAfterHours} hours of failures (\`WEBHOOK_DISABLE_AFTER_HOURS\`)`,
      ),
    );
    const delays = RETRY_SCHEDULE_S.map((s) =>
      s < 60 ? `${s} s` : s < 3600 ? `${s / 60} min` : `${s / 3600} h`,
    );
    assert.ok(
      webhooks.includes(
        `about ${delays.slice(0, -1).join(', ')} and ${delays.at(-1)}, then every ${delays.at(-1)}`,
      ),
      delays.join(', '),
    );
  });

  test('every response header a guide names is one the document gives an operation', () => {
    const documented = Object.keys(check.at('/components/headers') as object);
    const named = new Set(
      [
        ...String(check.at('/info/description')).matchAll(
          /`(X-[A-Za-z-]+|Retry-After|ETag|WWW-Authenticate)/g,
        ),
      ]
        .map(([, name = '']) => name)
        .filter((name) => name !== 'X-RateLimit-'),
    );
    assert.ok(named.size >= 7, [...named].join(', '));
    for (const name of named) assert.ok(documented.includes(name), name);
  });

  test('every shell example runs, each of its requests answered with success', async () => {
    const shell = [...guides].flatMap(([heading, text]) =>
      codeBlocks(text)
        .filter(({ language }) => language === 'sh')
        .map(({ code }) => ({ heading, code })),
    );
    assert.equal(shell.length, 6);
    for (const { heading, code } of shell) {
      const { stdout } = await runShell(code, examples);
      assert.ok(stdout.length > 0, `${heading}: printed something`);
      if (code.includes('If-None-Match')) assert.equal(stdout, '304\n', 'the ETag example');
    }
  });

  test(
    'every TypeScript example type-checks under tsc --strict, and runs (the webhook receiver is a server: checked only)',
    { timeout: 240_000 },
    async () => {
      const modules = Object.fromEntries(
        [...guides].flatMap(([heading, text]) =>
          codeBlocks(text)
            .filter(({ language }) => language === 'ts')
            .map(({ code }, i): [string, string] => [`${heading.replaceAll(/\W+/g, '-')}-${i}`, code]),
        ),
      );
      assert.deepEqual(Object.keys(modules), [
        'Errors-0',
        'Pagination-0',
        'Keeping-a-copy-in-sync-0',
        'Webhooks-and-verifying-them-0',
      ]);
      await typeCheck(modules, examples);
      const printed = async (name: string) => {
        const { stdout, stderr } = await runTypeScript(name, modules[name] ?? '', examples);
        assert.equal(stderr, '', name);
        return stdout;
      };
      assert.equal(await printed('Errors-0'), 'no such incident\n');
      assert.equal(await printed('Pagination-0'), '3 open incidents\n');
      // A first run exports every record; a second continues from the saved cursor, with nothing new.
      assert.match(
        await printed('Keeping-a-copy-in-sync-0'),
        /^upsert incident 3f1c2a8e-5b7d-4e9f-a1c3-2d4e6f8a0b1c$/m,
      );
      assert.equal(await printed('Keeping-a-copy-in-sync-0'), '');
    },
  );
});
