import assert from 'node:assert/strict';
import { gunzipSync } from 'node:zlib';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';

/**
 * Checks real responses against the OpenAPI document the app serves: the status is documented for
 * the operation, every documented header is present and of its type, and the body is in a
 * documented media type and matches its schema (JSON parsed; CSV, NDJSON, HTML and other text as
 * the string they are, after gzip if the response is compressed). Any test of the service can run
 * its responses through `check`.
 */

type Json = Record<string, unknown>;

const isRecord = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const field = (value: unknown, key: string): unknown => (isRecord(value) ? value[key] : undefined);

const escapePointer = (token: string): string => token.replaceAll('~', '~0').replaceAll('/', '~1');

const DOCUMENT_ID = 'urn:safety-api:openapi';

export interface Operation {
  path: string;
  /** Upper case, as requests name it. */
  method: string;
  operationId: string;
  operation: Json;
}

/** JSON, and the media types built on it (`application/jwk-set+json`). */
const isJson = (mediaType: string) => mediaType === 'application/json' || mediaType.endsWith('+json');

export class DocumentCheck {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true });
  private readonly validators = new Map<string, ValidateFunction>();
  /** `operationId status` of every response checked, for coverage assertions. */
  readonly seen = new Set<string>();

  readonly document: Json;

  constructor(document: Json) {
    this.document = document;
    addFormats.default(this.ajv);
    this.ajv.addSchema(document, DOCUMENT_ID);
  }

  /** The document as `/openapi.json` serves it. */
  static async of(app: FastifyInstance): Promise<DocumentCheck> {
    const res = await app.inject({ url: '/openapi.json' });
    assert.equal(res.statusCode, 200);
    return new DocumentCheck(res.json());
  }

  /** The value at a JSON pointer of the document (`/components/headers/ETag`). */
  at(pointer: string): unknown {
    let node: unknown = this.document;
    for (const token of pointer.split('/').slice(1)) {
      const key = token.replaceAll('~1', '/').replaceAll('~0', '~');
      node = Array.isArray(node) ? node[Number(key)] : isRecord(node) ? node[key] : undefined;
    }
    return node;
  }

  /** Every operation of the document (`paths`, not `webhooks`), in document order. */
  operations(): Operation[] {
    const paths = isRecord(this.document.paths) ? Object.entries(this.document.paths) : [];
    return paths.flatMap(([path, item]) =>
      Object.entries(isRecord(item) ? item : {}).flatMap(([method, operation]) =>
        isRecord(operation) && typeof operation.operationId === 'string'
          ? [{ path, method: method.toUpperCase(), operationId: operation.operationId, operation }]
          : [],
      ),
    );
  }

  /** Every operationId of the document, in document order. */
  operationIds(): string[] {
    return this.operations().map(({ operationId }) => operationId);
  }

  /** Follows a `$ref` (within the document) to its pointer. */
  private resolve(pointer: string): string {
    const node = this.at(pointer);
    const ref = isRecord(node) ? node.$ref : undefined;
    return typeof ref === 'string' ? this.resolve(ref.slice(1)) : pointer;
  }

  /** The documented path that `url` requests: a literal path before a templated one. */
  pathOf(url: string): string {
    const path = new URL(url, 'http://localhost').pathname;
    const paths = Object.keys(isRecord(this.document.paths) ? this.document.paths : {}).sort(
      (a, b) => Number(a.includes('{')) - Number(b.includes('{')),
    );
    const found = paths.find((template) =>
      new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(path),
    );
    assert.ok(found, `${path} is not documented`);
    return found;
  }

  private validator(pointer: string): ValidateFunction {
    let validate = this.validators.get(pointer);
    if (validate === undefined) {
      validate = this.ajv.compile({ $ref: `${DOCUMENT_ID}#${pointer}` });
      this.validators.set(pointer, validate);
    }
    return validate;
  }

  /** Whether `value` is valid against the schema at `pointer` (a parameter's: `/paths/…/parameters/0/schema`). */
  accepts(pointer: string, value: unknown): boolean {
    return this.validator(pointer)(value) === true;
  }

  private assertValid(pointer: string, value: unknown, what: string): void {
    const validate = this.validator(pointer);
    assert.ok(validate(value), `${what}: ${this.ajv.errorsText(validate.errors)}\n${JSON.stringify(value)}`);
  }

  /** Asserts that a webhook delivery (its event type, headers and JSON body) is one the document's `webhooks` promise. */
  checkWebhook(type: string, headers: Record<string, unknown>, body: unknown): void {
    const operation = `/webhooks/${escapePointer(type)}/post`;
    assert.ok(isRecord(this.at(operation)), `the document has no webhook ${type}`);
    const parameters = this.at(`${operation}/parameters`);
    for (const [index, parameter] of (Array.isArray(parameters) ? parameters : []).entries()) {
      const name = String(field(parameter, 'name'));
      assert.ok(headers[name] !== undefined, `${type}: header ${name} is missing`);
      this.assertValid(`${operation}/parameters/${index}/schema`, headers[name], `${type} header ${name}`);
    }
    this.assertValid(`${operation}/requestBody/content/application~1json/schema`, body, `${type} body`);
  }

  /** Asserts that `response`, the answer to `method url`, is one the document promises. */
  check(method: string, url: string, response: LightMyRequestResponse): void {
    const path = this.pathOf(url);
    const operationPointer = `/paths/${escapePointer(path)}/${method.toLowerCase()}`;
    const operation = this.at(operationPointer);
    assert.ok(isRecord(operation), `${method} ${path} is not documented`);
    const status = String(response.statusCode);
    const what = `${method} ${url} → ${status}`;
    const responsePointer = this.resolve(`${operationPointer}/responses/${status}`);
    const documented = this.at(responsePointer);
    assert.ok(isRecord(documented), `${what} is not a documented status of ${String(operation.operationId)}`);
    this.seen.add(`${String(operation.operationId)} ${status}`);

    for (const name of Object.keys(isRecord(documented.headers) ? documented.headers : {})) {
      const headerPointer = this.resolve(`${responsePointer}/headers/${escapePointer(name)}`);
      const header = this.at(headerPointer);
      const value = response.headers[name.toLowerCase()];
      if (value === undefined) {
        assert.ok(!(isRecord(header) && header.required === true), `${what}: no ${name} header`);
        continue;
      }
      const schema = isRecord(header) ? header.schema : undefined;
      const typed = isRecord(schema) && schema.type === 'integer' ? Number(value) : String(value);
      this.assertValid(`${headerPointer}/schema`, typed, `${what}: header ${name} "${String(value)}"`);
    }

    const content = isRecord(documented.content) ? documented.content : {};
    const payload =
      response.headers['content-encoding'] === 'gzip' ? gunzipSync(response.rawPayload) : response.rawPayload;
    if (Object.keys(content).length === 0) {
      assert.equal(payload.length, 0, `${what}: a body where the document has none`);
      return;
    }
    const mediaType = String(response.headers['content-type'] ?? '')
      .split(';')[0]
      ?.trim();
    assert.ok(
      mediaType !== undefined && mediaType in content,
      `${what}: undocumented media type ${mediaType}`,
    );
    const body = payload.toString('utf8');
    const schemaPointer = `${responsePointer}/content/${escapePointer(mediaType)}/schema`;
    this.assertValid(schemaPointer, isJson(mediaType) ? JSON.parse(body) : body, what);
  }

  /** Asserts that `value` is a `components.schemas[name]`: for answers the document describes in words. */
  checkComponent(name: string, value: unknown, what: string): void {
    const pointer = `/components/schemas/${escapePointer(name)}`;
    assert.ok(isRecord(this.at(pointer)), `the document has no schema ${name}`);
    this.assertValid(pointer, value, what);
  }
}
