import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { openApiDocument, type RegisteredRoute } from '../../src/openapi/document.ts';
import { PUBLIC_API_PATH } from '../../src/paths.ts';
import { HEADERS, TAGS } from '../../src/schemas/openapi.ts';
import { CodedErrorSchema, queryParameter } from '../../src/schemas/public.ts';
import { createTestContext, type TestContext } from '../helpers.ts';
import { DocumentCheck } from './document-check.ts';

describe('/openapi.json', () => {
  let ctx: TestContext;
  let check: DocumentCheck;

  before(async () => {
    ctx = await createTestContext('sqlite');
    check = await DocumentCheck.of(ctx.app);
  });
  after(() => ctx.close());

  const operation = (path: string, method = 'get') =>
    check.at(`/paths/${path.replaceAll('/', '~1')}/${method}`);

  test('every operation has a unique operationId, a known tag, a summary and its credential', () => {
    const ids = check.operationIds();
    assert.equal(new Set(ids).size, ids.length);
    const tags = new Set<string>(Object.values(TAGS).map((tag) => tag.name));
    for (const [path, item] of Object.entries(
      check.document.paths as Record<string, Record<string, unknown>>,
    )) {
      for (const [method, op] of Object.entries(item).filter(([key]) => key !== 'parameters')) {
        const {
          tags: opTags,
          summary,
          security,
        } = op as { tags: string[]; summary: string; security: unknown };
        assert.ok(opTags.length > 0 && opTags.every((tag) => tags.has(tag)), `${method} ${path}`);
        assert.ok(summary.length > 0, `${method} ${path}`);
        assert.deepEqual(Object.keys((security as Record<string, unknown>[])[0] ?? {}), [
          path.startsWith('/api/v1/public/') ? 'apiKey' : 'oauth2',
        ]);
      }
    }
    assert.deepEqual(check.at('/paths/~1api~1v1~1incidents/get/security'), [{ oauth2: ['incidents:read'] }]);
  });

  test('query parameters carry their real types, defaults and limits; the path id is a UUID', () => {
    assert.deepEqual(
      (operation('/api/v1/public/incidents') as { parameters: unknown[] }).parameters.map(
        (p) => (p as { schema: unknown }).schema,
      ),
      [
        { type: 'integer', minimum: 1, default: 1 },
        { type: 'integer', minimum: 1, maximum: 200, default: 50 },
      ],
    );
    assert.deepEqual(
      (operation('/api/v1/users') as { parameters: { name: string; schema: unknown }[] }).parameters.map(
        (p) => [p.name, p.schema],
      ),
      [
        ['_start', { type: 'integer', minimum: 0, default: 0 }],
        ['_limit', { type: 'integer', minimum: 1, maximum: 100, default: 20 }],
      ],
    );
    assert.deepEqual(check.at('/paths/~1api~1v1~1public~1incidents~1{id}/parameters/0'), {
      name: 'id',
      in: 'path',
      required: true,
      description: 'Incident id',
      schema: { type: 'string', format: 'uuid' },
    });
  });

  test('statuses: public reads 200, 304, 401, 403, 429, 500, 503 (and 404 for one incident); writes 405', () => {
    const statuses = (path: string, method = 'get') =>
      Object.keys((operation(path, method) as { responses: object }).responses);
    assert.deepEqual(statuses('/api/v1/public/users'), ['200', '304', '401', '403', '429', '500', '503']);
    assert.deepEqual(statuses('/api/v1/public/incidents/{id}'), [
      '200',
      '304',
      '401',
      '403',
      '404',
      '429',
      '500',
      '503',
    ]);
    assert.deepEqual(statuses('/api/v1/incidents'), ['200', '400', '401', '403', '429', '500', '503']);
    assert.deepEqual(statuses('/api/v1/public/incidents', 'delete'), [
      '401',
      '403',
      '405',
      '429',
      '500',
      '503',
    ]);
    assert.equal(check.at('/paths/~1api~1v1~1public~1users/get/responses/304/content'), undefined);
    assert.deepEqual(
      Object.keys(check.at('/components/responses/PublicServiceUnavailable/headers') as object),
      ['X-Request-Id', 'Retry-After'],
    );
    assert.deepEqual(
      Object.keys(check.at('/components/responses/PublicRefusedMethodNotAllowed/headers') as object),
      ['X-Request-Id', 'Allow', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'],
    );
  });

  test('named components, and the statuses seen in data described without an enum', () => {
    const schemas = check.at('/components/schemas') as Record<string, Record<string, unknown>>;
    for (const name of ['Incident', 'User', 'Department', 'Location', 'IncidentPagination', 'Pagination']) {
      assert.ok(schemas[name], name);
    }
    assert.ok(schemas.Error && schemas.CodedError);
    const status = check.at('/components/schemas/Incident/properties/status') as Record<string, unknown>;
    assert.equal(status.type, 'string');
    assert.equal(status.enum, undefined);
    assert.deepEqual(status.examples, [
      'open',
      'under_investigation',
      'action_required',
      'resolved',
      'closed',
    ]);
    assert.deepEqual(
      check.at(
        '/paths/~1api~1v1~1public~1incidents/get/responses/200/content/application~1json/schema/properties/data/properties/data/items',
      ),
      { $ref: '#/components/schemas/Incident' },
    );
  });
});

/**
 * A throwaway route under the public API, declared as the changes feed and the exports do: 400 and
 * 410 error bodies with codes, a CSV body, a response header. The generator must express each.
 */
describe('what a route declares reaches the document', () => {
  let app: FastifyInstance;
  let check: DocumentCheck;

  before(async () => {
    app = Fastify();
    const routes: RegisteredRoute[] = [];
    app.addHook('onRoute', (route) => {
      routes.push(route);
    });
    // What the public API's own hooks add to every answer (src/openapi/surfaces.ts).
    app.addHook('onRequest', async (_request, reply) => {
      reply.headers({
        'x-request-id': 'r1',
        'x-ratelimit-limit': 10,
        'x-ratelimit-remaining': 9,
        'x-ratelimit-reset': 1767229200,
      });
    });
    await app.register(
      async (api) => {
        api.get<{ Querystring: { cursor?: string } }>(
          '/widgets.csv',
          {
            schema: {
              operationId: 'exportWidgets',
              tags: [TAGS.incidents.name],
              summary: 'Every widget as CSV',
              querystring: Type.Object({
                cursor: queryParameter(Type.String(), 'Where to start'),
              }),
              // JSON bodies only: Fastify serializes through these. The CSV is declared below.
              response: { 400: CodedErrorSchema, 410: CodedErrorSchema },
            },
            config: {
              openapi: {
                responses: {
                  200: {
                    description: 'The widgets',
                    headers: [HEADERS.changesCursor],
                    content: { 'text/csv': { schema: Type.String(), example: 'id,name\r\n1,Bolt\r\n' } },
                  },
                  410: {
                    description: 'The cursor is older than the retention',
                    examples: {
                      expired: { error: 'CURSOR_EXPIRED', message: 'Start again without a cursor.' },
                    },
                  },
                },
              },
            },
          },
          async (request, reply) => {
            if (request.query.cursor === 'old') {
              return reply
                .code(410)
                .send({ error: 'CURSOR_EXPIRED', message: 'Start again without a cursor.' });
            }
            if (request.query.cursor === 'bad') {
              return reply.code(400).send({ error: 'INVALID_CURSOR', message: 'The cursor is not valid.' });
            }
            if (request.query.cursor === 'headerless') return reply.type('text/csv').send('id,name\r\n');
            if (request.query.cursor === 'json') {
              return reply.header('x-changes-cursor', 'c1').send({ error: false, data: null });
            }
            if (request.query.cursor === 'gone') return reply.callNotFound();
            return reply
              .header('x-changes-cursor', 'c1')
              .type('text/csv; charset=utf-8')
              .send('id,name\r\n1,Bolt\r\n');
          },
        );
      },
      { prefix: PUBLIC_API_PATH },
    );
    await app.ready();
    check = new DocumentCheck(openApiDocument('https://safety-api.invalid', routes));
  });
  after(() => app.close());

  test('the media type, the header and the coded 400 and 410 are documented', () => {
    const responses = '/paths/~1api~1v1~1public~1widgets.csv/get/responses';
    assert.deepEqual(check.at(`${responses}/200/content/text~1csv`), {
      schema: { type: 'string' },
      example: 'id,name\r\n1,Bolt\r\n',
    });
    assert.deepEqual(check.at(`${responses}/200/headers/X-Changes-Cursor`), {
      $ref: '#/components/headers/X-Changes-Cursor',
    });
    assert.equal(check.at('/components/headers/X-Changes-Cursor/required'), true);
    assert.deepEqual(check.at(`${responses}/410/content/application~1json/schema`), {
      $ref: '#/components/schemas/CodedError',
    });
    assert.equal(check.at(`${responses}/410/description`), 'The cursor is older than the retention');
    assert.equal(check.at(`${responses}/400/description`), 'Bad Request');
    assert.deepEqual(
      (check.at('/paths/~1api~1v1~1public~1widgets.csv/get/parameters') as { name: string }[]).map(
        (p) => p.name,
      ),
      ['cursor'],
    );
  });

  test('the response check accepts what the route declares and refuses what it does not', async () => {
    const get = (cursor: string) => app.inject({ url: `${PUBLIC_API_PATH}/widgets.csv?cursor=${cursor}` });
    for (const cursor of ['new', 'old', 'bad'])
      check.check('GET', '/api/v1/public/widgets.csv', await get(cursor));
    const refused = async (cursor: string, reason: RegExp) =>
      assert.throws(() => check.check('GET', '/api/v1/public/widgets.csv', response), reason, cursor);
    let response = await get('headerless');
    await refused('headerless', /no X-Changes-Cursor header/);
    response = await get('json');
    await refused('json', /undocumented media type application\/json/);
    response = await get('gone');
    await refused('gone', /not a documented status/);
  });
});
