import { STATUS_CODES } from 'node:http';
import type { RouteOptions } from 'fastify';
import {
  componentName,
  documentedParameter,
  type HeaderDoc,
  type MediaDoc,
  type ResponseDoc,
  TAGS,
} from '../schemas/openapi.ts';
import { WEBHOOK_EVENTS, WEBHOOK_HEADERS } from '../schemas/webhooks.ts';
import { securitySchemes, type Surface, type SurfaceResponse, surfaceOf } from './surfaces.ts';

/**
 * The OpenAPI 3.1 document of the public and wider APIs, built from the routes as registered: the
 * JSON bodies are the very schemas Fastify serializes with, the rest is what each route declares
 * in `schema` (operationId, tags, summary, description, security, parameters) and in
 * `config.openapi` (src/schemas/openapi.ts), on top of what its surface shares (./surfaces.ts).
 */

type Json = Record<string, unknown>;

const isRecord = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const field = (value: unknown, key: string): unknown => (isRecord(value) ? value[key] : undefined);

const stringField = (value: unknown, key: string): string | undefined => {
  const found = field(value, key);
  return typeof found === 'string' ? found : undefined;
};

/** Turns TypeBox schemas into plain JSON, naming each component once and referring to it elsewhere. */
class Components {
  readonly schemas: Json = {};
  readonly headers: Json = {};
  readonly responses: Json = {};
  private readonly named = new Map<string, unknown>();
  private readonly surfaceResponses = new Map<Surface, Map<SurfaceResponse, string>>();

  json(value: unknown): unknown {
    if (Array.isArray(value)) return value.map((item) => this.json(item));
    if (!isRecord(value)) return value;
    const name = componentName(value);
    if (name === undefined) return this.copy(value);
    const known = this.named.get(name);
    if (known === undefined) {
      this.named.set(name, value);
      this.schemas[name] = this.copy(value);
    } else if (known !== value) {
      throw new Error(`two different schemas are named ${name}`);
    }
    return { $ref: `#/components/schemas/${name}` };
  }

  /** Enumerable keys only: TypeBox's own markers (`~kind`, `~optional`) stay out. */
  private copy(value: Json): Json {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, this.json(item)]));
  }

  header(header: HeaderDoc): Json {
    this.headers[header.name] ??= {
      description: header.description,
      required: true,
      schema: this.json(header.schema),
      example: header.example,
    };
    return { $ref: `#/components/headers/${header.name}` };
  }

  /** A response every operation of a surface shares, described once in `components.responses`. */
  surfaceResponse(surface: Surface, name: string, doc: SurfaceResponse, build: () => Json): Json {
    const names = this.surfaceResponses.get(surface) ?? new Map<SurfaceResponse, string>();
    this.surfaceResponses.set(surface, names);
    let known = names.get(doc);
    if (known === undefined) {
      known = `${surface.name}${name}`;
      names.set(doc, known);
      this.responses[known] = build();
    }
    return { $ref: `#/components/responses/${known}` };
  }
}

/** A route as the onRoute hook saw it; read when the document is first asked for. */
export type RegisteredRoute = Pick<RouteOptions, 'method' | 'url' | 'schema' | 'config'>;

interface Operation {
  path: string;
  /** Declared once on the path, for the refused methods as well. */
  pathParameters: Json[];
  method: string;
  surface: Surface;
  operation: Json;
}

const pascal = (words: string[]): string =>
  words.map((word) => (word[0]?.toUpperCase() ?? '') + word.slice(1)).join('');

export function openApiDocument(baseUrl: string, routes: RegisteredRoute[]): Json {
  const components = new Components();

  const response = (status: string, body: unknown, doc: ResponseDoc | undefined, headers: HeaderDoc[]) => {
    const content: Json = {};
    if (body !== undefined) {
      const examples = Object.entries(doc?.examples ?? {}).map(([name, value]) => [name, { value }]);
      content['application/json'] = {
        schema: components.json(body),
        ...(examples.length > 0 ? { examples: Object.fromEntries(examples) } : {}),
      };
    }
    for (const [mediaType, media] of Object.entries<MediaDoc>(doc?.content ?? {})) {
      content[mediaType] = { schema: components.json(media.schema), example: media.example };
    }
    const all = [...headers, ...(doc?.headers ?? [])];
    return {
      description: doc?.description ?? STATUS_CODES[Number(status)] ?? `HTTP ${status}`,
      ...(all.length > 0
        ? { headers: Object.fromEntries(all.map((header) => [header.name, components.header(header)])) }
        : {}),
      ...(Object.keys(content).length > 0 ? { content } : {}),
    };
  };

  const byStatus = (responses: Record<string, Json>): Record<string, Json> =>
    Object.fromEntries(Object.entries(responses).sort(([a], [b]) => Number(a) - Number(b)));

  /** `refusal`: the answers to methods no route takes, named apart from the routes' own. */
  const surfaceResponses = (surface: Surface, statuses: Surface['responses'], refusal: string) =>
    Object.fromEntries(
      Object.entries(statuses).map(([status, doc]) => [
        status,
        components.surfaceResponse(
          surface,
          refusal + pascal((STATUS_CODES[Number(status)] ?? status).split(/\W+/)),
          doc,
          () => response(status, doc.schema, doc, surface.everyResponse),
        ),
      ]),
    );

  const parameters = (url: string, schema: unknown): { path: Json[]; query: Json[] } => {
    const parameter = (name: string, where: 'path' | 'query', accepted: unknown, required: boolean) => ({
      name,
      in: where,
      required,
      ...(stringField(accepted, 'description') === undefined
        ? {}
        : { description: stringField(accepted, 'description') }),
      schema: components.json(
        (isRecord(accepted) ? documentedParameter(accepted) : undefined) ?? { type: 'string' },
      ),
    });
    const pathParameters = field(field(schema, 'params'), 'properties');
    const query = field(schema, 'querystring');
    const required = field(query, 'required');
    return {
      path: [...url.matchAll(/:(\w+)/g)].map(([, name = '']) =>
        parameter(name, 'path', field(pathParameters, name), true),
      ),
      query: Object.entries(field(query, 'properties') ?? {}).map(([name, accepted]) =>
        parameter(name, 'query', accepted, Array.isArray(required) && required.includes(name)),
      ),
    };
  };

  const operations: Operation[] = [];
  for (const route of routes) {
    const surface = surfaceOf(route.url);
    const schema = route.schema;
    if (surface === undefined || field(schema, 'response') === undefined) continue;
    const bodies = field(schema, 'response');
    const docs = route.config?.openapi?.responses ?? {};
    const own = new Set([...Object.keys(isRecord(bodies) ? bodies : {}), ...Object.keys(docs)]);
    const responses: Record<string, Json> = surfaceResponses(surface, surface.responses, '');
    for (const status of own) {
      responses[status] = response(status, field(bodies, status), docs[Number(status)], [
        ...surface.everyResponse,
        ...surface.admitted,
      ]);
    }
    const params = parameters(route.url, schema);
    for (const method of [route.method].flat()) {
      if (method === 'HEAD') continue;
      operations.push({
        path: route.url.replace(/:(\w+)/g, '{$1}'),
        pathParameters: params.path,
        method: method.toLowerCase(),
        surface,
        operation: {
          operationId: schema?.operationId,
          tags: schema?.tags,
          summary: schema?.summary,
          description: schema?.description,
          security: schema?.security ?? surface.security,
          ...(params.query.length > 0 ? { parameters: params.query } : {}),
          responses: byStatus(responses),
        },
      });
    }
  }

  const paths: Record<string, Json> = {};
  for (const { path, pathParameters, method, operation } of operations) {
    const item = (paths[path] ??= pathParameters.length > 0 ? { parameters: pathParameters } : {});
    item[method] = operation;
  }
  // Every method no route of the path takes is refused, with the surface's answer.
  for (const { path, surface, operation } of operations) {
    const item = (paths[path] ??= {});
    const words = path
      .slice('/api/v1/'.length)
      .split('/')
      .map((segment) => segment.replace(/[{}]/g, ''));
    for (const method of surface.refused.methods) {
      const key = method.toLowerCase();
      if (key in item) continue;
      item[key] = {
        operationId: `${key}${pascal(words)}Refused`,
        tags: operation.tags,
        summary: `${method} is refused: the API is read-only`,
        security: surface.security,
        responses: byStatus(surfaceResponses(surface, surface.refused.responses, 'Refused')),
      };
    }
  }

  const webhooks = Object.fromEntries(
    WEBHOOK_EVENTS.map((event) => [
      event.type,
      {
        post: {
          operationId: `${event.type.replace(/\.(\w)/, (_m, c: string) => c.toUpperCase())}Event`,
          tags: [TAGS.webhooks.name],
          // The receiver authenticates the sender by the signature, not by a credential scheme.
          security: [],
          summary: event.summary,
          description: event.description,
          parameters: WEBHOOK_HEADERS.map((header) => ({
            name: header.name,
            in: 'header',
            required: true,
            description: header.description,
            schema: components.json(header.schema),
            example: header.example,
          })),
          requestBody: {
            required: true,
            content: { 'application/json': { schema: components.json(event.schema) } },
          },
          responses: event.responses,
        },
      },
    ]),
  );

  // A tag missing from TAGS is listed without a description, which the lint refuses.
  const known: Json[] = Object.values(TAGS);
  const used = new Set([
    ...operations.flatMap(({ operation }) => [operation.tags].flat()),
    TAGS.webhooks.name,
  ]);
  const tags = [...used].map((name) => known.find((tag) => tag.name === name) ?? { name });
  return {
    openapi: '3.1.0',
    info: {
      title: 'Safety Incident API',
      version: '1',
      description:
        "Read an account's safety incidents, users, departments and locations. The public API " +
        '(`/api/v1/public`) takes an API key, the wider API (`/api/v1`) an OAuth 2 access token. ' +
        'Every response carries `X-Request-Id`; every counted response the `X-RateLimit-*` headers ' +
        'of the hourly allowance. HEAD behaves as GET without a body. A path no route takes answers 404 `{ "error": true, "message": "Not found" }` after the credential checks.',
    },
    servers: [{ url: baseUrl }],
    tags,
    paths,
    webhooks,
    components: {
      schemas: components.schemas,
      headers: components.headers,
      responses: components.responses,
      securitySchemes: securitySchemes(baseUrl),
    },
  };
}
