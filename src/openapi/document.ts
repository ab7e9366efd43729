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
import { codeSamples, sdkInstallation, xCodeSamples } from './code-samples.ts';
import { guides } from './guides.ts';
import { securitySchemes, type Surface, type SurfaceResponse, surfaceOf } from './surfaces.ts';

/**
 * The OpenAPI 3.1 document of the service, built from the routes as registered: every route that
 * declares an `operationId` is an operation, and so is every operation a route hands over to the
 * OAuth provider (`config.openapi.delegated`). The JSON bodies are the very schemas Fastify
 * serializes with; the rest is what each route declares in `schema` (operationId, tags, summary,
 * description, security, parameters, body) and in `config.openapi` (src/schemas/openapi.ts), on
 * top of what its surface shares (./surfaces.ts).
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
  /** Declared once on the path. */
  pathParameters: Json[];
  method: string;
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

  const surfaceResponses = (surface: Surface) =>
    Object.fromEntries(
      Object.entries(surface.responses).map(([status, doc]) => [
        status,
        components.surfaceResponse(
          surface,
          pascal((STATUS_CODES[Number(status)] ?? status).split(/\W+/)),
          doc,
          () => response(status, doc.schema, doc, surface.everyResponse),
        ),
      ]),
    );

  const parameters = (url: string, schema: unknown): { path: Json[]; query: Json[] } => {
    const parameter = (name: string, where: 'path' | 'query', accepted: unknown, required: boolean) => {
      const description = stringField(accepted, 'description');
      // The description belongs to the parameter; the schema is the one declared for the document.
      const declared = isRecord(accepted)
        ? (documentedParameter(accepted) ??
          Object.fromEntries(Object.entries(accepted).filter(([key]) => key !== 'description')))
        : { type: 'string' };
      return {
        name,
        in: where,
        required,
        ...(description === undefined ? {} : { description }),
        schema: components.json(declared),
      };
    };
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

  /** A body as Fastify declares one per media type: `{ content: { <media type>: { schema } } }`. */
  const requestBody = (body: unknown): Json | undefined => {
    const content = field(body, 'content');
    if (!isRecord(content)) return undefined;
    const schemas = Object.entries(content).map(([mediaType, media]): [string, unknown] => [
      mediaType,
      field(media, 'schema'),
    ]);
    // A body whose fields are all optional may be left out (userinfo takes its token in a header too).
    const required = schemas.some(([, schema]) => {
      const fields = field(schema, 'required');
      return Array.isArray(fields) && fields.length > 0;
    });
    return {
      required,
      content: Object.fromEntries(
        schemas.map(([mediaType, schema]) => [mediaType, { schema: components.json(schema) }]),
      ),
    };
  };

  const samples = codeSamples(baseUrl);
  const operations: Operation[] = [];
  const documented = routes.flatMap((route) => route.config?.openapi?.delegated ?? [route]);
  for (const route of documented) {
    const schema = route.schema;
    const surface = surfaceOf(route.url);
    if (schema?.operationId === undefined || surface === undefined) continue;
    const bodies = field(schema, 'response');
    const docs = route.config?.openapi?.responses ?? {};
    const own = new Set([...Object.keys(isRecord(bodies) ? bodies : {}), ...Object.keys(docs)]);
    const responses: Record<string, Json> = surfaceResponses(surface);
    for (const status of own) {
      responses[status] = response(status, field(bodies, status), docs[Number(status)], [
        ...surface.everyResponse,
        ...surface.admitted,
      ]);
    }
    const params = parameters(route.url, schema);
    const sample = samples[schema.operationId];
    const body = requestBody(schema.body);
    for (const method of [route.method].flat()) {
      // HEAD is GET without a body (info.description), not an operation of its own.
      if (method === 'HEAD') continue;
      operations.push({
        path: route.url.replace(/:(\w+)/g, '{$1}'),
        pathParameters: params.path,
        method: method.toLowerCase(),
        operation: {
          operationId: schema.operationId,
          tags: schema.tags,
          summary: schema.summary,
          description: schema.description,
          security: schema.security ?? surface.security,
          ...(params.query.length > 0 ? { parameters: params.query } : {}),
          ...(body === undefined ? {} : { requestBody: body }),
          responses: byStatus(responses),
          ...(sample === undefined ? {} : { 'x-codeSamples': xCodeSamples(sample) }),
        },
      });
    }
  }

  const paths: Record<string, Json> = {};
  for (const { path, pathParameters, method, operation } of operations) {
    const item = (paths[path] ??= pathParameters.length > 0 ? { parameters: pathParameters } : {});
    item[method] = operation;
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

  const used = new Set([
    ...operations.flatMap(({ operation }) => [operation.tags].flat()),
    TAGS.webhooks.name,
  ]);
  // In the order of TAGS; a tag missing from it is listed without a description, which the lint refuses.
  const known: { name: string; description: string }[] = Object.values(TAGS);
  const tags = [
    ...known.filter((tag) => used.has(tag.name)),
    ...[...used].filter((name) => !known.some((tag) => tag.name === name)).map((name) => ({ name })),
  ];
  return {
    openapi: '3.1.0',
    info: {
      title: 'Safety Incident API',
      version: '1',
      description: guides(baseUrl),
      'x-scalar-sdk-installation': sdkInstallation(),
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
