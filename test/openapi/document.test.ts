import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { ApiError, ERROR_CODES } from '../../src/errors.ts';
import { openApiDocument, type RegisteredRoute } from '../../src/openapi/document.ts';
import { PUBLIC_API_PATH } from '../../src/paths.ts';
import { HEADERS, TAGS } from '../../src/schemas/openapi.ts';
import { CodedErrorSchema, queryParameter } from '../../src/schemas/public.ts';
import { createTestContext, type TestContext } from '../helpers.ts';
import { DocumentCheck } from './document-check.ts';

/** A registered route, as `printRoutes` lists it: `GET /api/v1/public/incidents/:id`. */
interface Route {
  method: string;
  path: string;
}

/**
 * Every route the application holds, read from `printRoutes` (the one listing Fastify offers):
 * a tree whose nodes print their path relative to their parent's and their methods.
 */
function registeredRoutes(app: FastifyInstance): Route[] {
  const routes: Route[] = [];
  const ancestors: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const node = /^((?:│ {3}| {4})*)[├└]── (.*) \(([^)]*)\)$/.exec(line);
    if (node === null) continue;
    const [, indent = '', segment = '', methods = ''] = node;
    const depth = indent.length / 4;
    ancestors.length = depth;
    const path = (ancestors[depth - 1] ?? '') + segment;
    ancestors.push(path);
    for (const method of methods.split(', ')) if (method !== '-') routes.push({ method, path });
  }
  return routes;
}

/** Registered routes that are not operations of the API, and why. */
const NOT_OPERATIONS: [RegExp, string][] = [
  [/^\/openapi\.json$|^\/docs(\/|$)/, 'the document itself and its reference page'],
  [/^\/metrics$/, "the operators' Prometheus scrape (on a port of its own when METRICS_PORT is set)"],
  [/^\/admin(\/|$)/, 'the admin panel: pages for people'],
  [
    /^\/integration\/v1\/oauth2\/interaction\//,
    'the sign-in and consent pages /authorize sends a browser to',
  ],
  // The wildcard of the OAuth plugin, printed without its prefix.
  [/\*$/, "the OAuth provider's mount: its endpoints are checked against its discovery document"],
];

/** The routes of `app` that are operations but not in the document (HEAD is GET's twin). */
function undocumented(app: FastifyInstance, check: DocumentCheck): string[] {
  return registeredRoutes(app)
    .filter(
      ({ method, path }) => method !== 'HEAD' && !NOT_OPERATIONS.some(([pattern]) => pattern.test(path)),
    )
    .map(({ method, path }) => `${method} ${path.replace(/:(\w+)/g, '{$1}')}`)
    .filter((route) => {
      const [method = '', path = ''] = route.split(' ');
      return check.at(`/paths/${path.replaceAll('/', '~1')}/${method.toLowerCase()}`) === undefined;
    });
}

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

  test('every route the server registers is documented', () => {
    const routes = registeredRoutes(ctx.app).map(({ method, path }) => `${method} ${path}`);
    // The listing is read right: a nested route, the probes, the OAuth pages.
    for (const known of [
      'GET /api/v1/public/incidents/:id',
      'GET /api/v1/public/exports/locations.csv',
      'GET /readyz',
      'POST /integration/v1/oauth2/interaction/:uid/login',
    ]) {
      assert.ok(routes.includes(known), known);
    }
    assert.deepEqual(undocumented(ctx.app, check), []);
  });

  test('every endpoint the OAuth discovery document advertises is documented', async () => {
    const discovery = '/integration/v1/oauth2/.well-known/openid-configuration';
    const metadata: Record<string, unknown> = (await ctx.app.inject({ url: discovery })).json();
    const issuer = String(metadata.issuer);
    const advertised = Object.entries(metadata).flatMap(([name, value]) =>
      /_(endpoint|uri)$/.test(name) && typeof value === 'string' && value.startsWith(`${issuer}/`)
        ? [new URL(value).pathname]
        : [],
    );
    assert.ok(advertised.length >= 7, advertised.join());
    const documented = new Set(check.operations().map(({ path }) => path));
    for (const path of [discovery, ...advertised]) assert.ok(documented.has(path), path);
  });

  test('every documented operation is one the server answers', async () => {
    for (const { method, path } of check.operations()) {
      if (path.startsWith('/integration/v1/oauth2/')) {
        // Behind one wildcard route: the provider answers 404 for what it does not serve.
        const res = await ctx.app.inject({ method, url: path });
        assert.notEqual(res.statusCode, 404, `${method} ${path}`);
      } else {
        const url = path.replace(/\{(\w+)\}/g, ':$1');
        assert.ok(ctx.app.hasRoute({ method, url }), `${method} ${path}`);
      }
    }
  });

  test('stable readable operationIds, none for a refusal; every operation answers with success', () => {
    const ids = check.operationIds();
    assert.equal(new Set(ids).size, ids.length);
    for (const id of ids) {
      assert.match(id, /^[a-z][a-zA-Z]+$/);
      assert.doesNotMatch(id, /Refused$/);
    }
    for (const id of [
      'listIncidents',
      'getIncident',
      'listUsers',
      'listDepartments',
      'listLocations',
      'listChanges',
      'exportIncidents',
      'exportIncidentsCsv',
      'listIncidentsPaged',
      'createToken',
      'authorize',
      'checkReadiness',
    ]) {
      assert.ok(ids.includes(id), id);
    }
    // An operation whose every answer is a refusal is not one: the 405s are described in words.
    for (const { path, method, operation: op } of check.operations()) {
      const statuses = Object.keys(op.responses as object);
      assert.ok(
        statuses.some((status) => /^[23]\d\d$/.test(status) && status !== '304'),
        `${method} ${path}`,
      );
    }
  });

  test('every operation has a described tag, a summary and the credential of its surface', () => {
    const described = new Set(
      (check.at('/tags') as { name: string; description: string }[])
        .filter((tag) => tag.description.length > 0)
        .map((tag) => tag.name),
    );
    const schemes = Object.keys(check.at('/components/securitySchemes') as object);
    for (const { path, method, operation: op } of check.operations()) {
      const what = `${method} ${path}`;
      const { tags, summary, security } = op as {
        tags: string[];
        summary: string;
        security: Record<string, string[]>[];
      };
      assert.ok(tags.length > 0 && tags.every((tag) => described.has(tag)), what);
      assert.ok(summary.length > 0, what);
      const names = security.flatMap((requirement) => Object.keys(requirement));
      assert.ok(
        names.every((name) => schemes.includes(name)),
        what,
      );
      const expected = path.startsWith('/api/v1/public/')
        ? ['apiKey']
        : path.startsWith('/api/v1/')
          ? ['oauth2']
          : names;
      assert.deepEqual(names, expected, what);
    }
    const security = (path: string, method = 'get') =>
      check.at(`/paths/${path.replaceAll('/', '~1')}/${method}/security`);
    assert.deepEqual(security('/api/v1/incidents'), [{ oauth2: ['incidents:read'] }]);
    assert.deepEqual(security('/healthz'), []);
    assert.deepEqual(security('/integration/v1/oauth2/token', 'post'), [{ oauthClient: [] }, {}]);
    assert.deepEqual(security('/integration/v1/oauth2/userinfo'), [{ oauth2: ['openid'] }]);
  });

  test('normalized query parameters have a type and a default, and no bound the server would not hold to', () => {
    const schemas = (path: string) =>
      Object.fromEntries(
        (operation(path) as { parameters: { name: string; schema: unknown }[] }).parameters.map((p) => [
          p.name,
          p.schema,
        ]),
      );
    assert.deepEqual(schemas('/api/v1/public/incidents'), {
      page: { type: 'integer', default: 1 },
      limit: { type: 'integer', default: 50 },
    });
    assert.deepEqual(schemas('/api/v1/public/changes').limit, { type: 'integer', default: 100 });
    // The wider API refuses a negative `_start` and a `_limit` below 1 (400), and reduces a larger one.
    assert.deepEqual(schemas('/api/v1/users'), {
      _start: { type: 'integer', minimum: 0, default: 0 },
      _limit: { type: 'integer', minimum: 1, default: 20 },
    });
    assert.deepEqual(check.at('/paths/~1api~1v1~1public~1incidents~1{id}/parameters/0'), {
      name: 'id',
      in: 'path',
      required: true,
      description: 'Incident id',
      schema: { type: 'string', format: 'uuid' },
    });
  });

  test('statuses: public reads 200, 304, 401, 403, 413, 429, 500, 503 (and 404 for one incident)', () => {
    const statuses = (path: string, method = 'get') =>
      Object.keys((operation(path, method) as { responses: object }).responses);
    assert.deepEqual(statuses('/api/v1/public/users'), [
      '200',
      '304',
      '401',
      '403',
      '413',
      '429',
      '500',
      '503',
    ]);
    assert.deepEqual(statuses('/api/v1/public/incidents/{id}'), [
      '200',
      '304',
      '401',
      '403',
      '404',
      '413',
      '429',
      '500',
      '503',
    ]);
    assert.deepEqual(statuses('/api/v1/public/exports/incidents.ndjson'), [
      '200',
      '401',
      '403',
      '413',
      '429',
      '500',
      '503',
    ]);
    assert.deepEqual(statuses('/api/v1/incidents'), ['200', '400', '401', '403', '413', '429', '500', '503']);
    assert.equal(operation('/api/v1/public/incidents', 'delete'), undefined);
    assert.equal(check.at('/paths/~1api~1v1~1public~1users/get/responses/304/content'), undefined);
    assert.deepEqual(
      Object.keys(check.at('/components/responses/PublicServiceUnavailable/headers') as object),
      ['X-Request-Id', 'Retry-After'],
    );
  });

  test("a CodedError's `error` is an enum of every code the API answers, each at its status", () => {
    const error = check.at('/components/schemas/CodedError/properties/error') as Record<string, unknown>;
    assert.equal(error.type, 'string');
    assert.equal(error.pattern, undefined);
    assert.deepEqual(error.enum, Object.keys(ERROR_CODES));
    const answers = [
      ApiError.invalidCursor(),
      ApiError.apiKeyRequired(),
      ApiError.apiKeyInvalid(),
      ApiError.featureNotAvailable(),
      ApiError.insufficientScope('POST', 'read'),
      ApiError.cursorExpired(400),
      ApiError.rateLimitExceeded(1000, 60),
    ];
    assert.deepEqual(
      answers.map(({ code, statusCode }) => [code, statusCode]),
      Object.entries(ERROR_CODES).map(([code, { status }]) => [code, status]),
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
        // Registered without declaring an operation: what the completeness check must catch.
        api.get('/gadgets', async () => ({ error: false, data: [] }));
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

  test('a registered route the document misses is found', () => {
    assert.deepEqual(undocumented(app, check), ['GET /api/v1/public/gadgets']);
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
