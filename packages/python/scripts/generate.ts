// The Python client's dataclasses, generated from the OpenAPI document exactly as the server serves
// it (the same document the TypeScript SDK's types come from: packages/sdk/scripts/generate.ts).
// Run directly (`node packages/python/scripts/generate.ts`) it writes
// src/safety_incident_api/models.py, which is committed; test/python/generated.test.ts regenerates
// in memory and fails when that file is stale.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { openApiDocument } from '../../sdk/scripts/generate.ts';

export const GENERATED_FILE = fileURLToPath(new URL('../src/safety_incident_api/models.py', import.meta.url));

/** The schemas the client hands out; every schema they reference comes along. */
const ROOT_SCHEMAS = [
  'Incident',
  'User',
  'Department',
  'Location',
  'IncidentPagination',
  'Pagination',
  'ChangesPage',
];

/**
 * The classes of the list operations' inline result objects: a public list's `data` (inside the
 * `{ error, data }` envelope), or a wider-API page's whole body (`{ response, pagination }`).
 */
const RESULT_MODELS: Record<string, string> = {
  listIncidents: 'IncidentList',
  listIncidentsPaged: 'IncidentPage',
  listUsersPaged: 'UserPage',
  listDepartmentsPaged: 'DepartmentPage',
  listLocationsPaged: 'LocationPage',
};

type JsonObject = { [key: string]: unknown };
const isObject = (value: unknown): value is JsonObject =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function objectAt(value: unknown, ...keys: string[]): JsonObject {
  let current = value;
  for (const key of keys) current = isObject(current) ? current[key] : undefined;
  if (!isObject(current)) throw new Error(`the OpenAPI document has no object at ${keys.join('.')}`);
  return current;
}

const stringAt = (value: JsonObject, key: string): string | undefined =>
  typeof value[key] === 'string' ? value[key] : undefined;

/** A Python type, and how a value of it is read from the parsed JSON. */
type PyType =
  | { kind: 'plain'; annotation: string }
  | { kind: 'model'; name: string }
  | { kind: 'union'; name: string }
  | { kind: 'list'; item: PyType }
  | { kind: 'optional'; inner: PyType };

interface Field {
  jsonName: string;
  pyName: string;
  type: PyType;
  required: boolean;
  description: string | undefined;
}

interface Model {
  name: string;
  description: string | undefined;
  fields: Field[];
}

/** A union of schemas told apart by a property that holds a constant in each, as `type` does. */
interface Union {
  name: string;
  discriminator: string;
  members: { value: string; model: string }[];
}

const PYTHON_KEYWORDS = new Set(
  'False None True and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield'.split(
    ' ',
  ),
);

/** `totalRecords` → `total_records`; a keyword gets a trailing underscore. */
function pythonName(jsonName: string): string {
  const snake = jsonName.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();
  if (!/^[a-z_][a-z0-9_]*$/.test(snake)) throw new Error(`no Python name for the property ${jsonName}`);
  return PYTHON_KEYWORDS.has(snake) ? `${snake}_` : snake;
}

const pascal = (name: string) => name.replace(/(^|_)([a-z])/g, (_m, _s, c: string) => c.toUpperCase());

/** A Python literal of a JSON scalar: JSON's string escapes are Python's too. */
function pythonLiteral(value: unknown): string {
  if (typeof value === 'string' || typeof value === 'number') return JSON.stringify(value);
  if (typeof value === 'boolean') return value ? 'True' : 'False';
  if (value === null) return 'None';
  throw new Error(`no Python literal for ${JSON.stringify(value)}`);
}

class Generator {
  readonly models = new Map<string, Model>();
  readonly unions = new Map<string, Union>();
  readonly #schemas: JsonObject;

  constructor(document: unknown) {
    this.#schemas = objectAt(document, 'components', 'schemas');
  }

  /** The schema a `$ref` names, with its name. */
  #resolve(ref: string): { name: string; schema: JsonObject } {
    const name = /^#\/components\/schemas\/([A-Za-z0-9]+)$/.exec(ref)?.[1];
    if (name === undefined) throw new Error(`unsupported $ref ${ref}`);
    return { name, schema: objectAt(this.#schemas, name) };
  }

  /** The class of a component schema, generated once. */
  component(name: string): string {
    if (!this.models.has(name)) this.model(name, objectAt(this.#schemas, name));
    return name;
  }

  model(name: string, schema: JsonObject, description = stringAt(schema, 'description')): string {
    if (schema.type !== 'object' || !isObject(schema.properties))
      throw new Error(`${name}: only object schemas become classes`);
    const model: Model = { name, description, fields: [] };

    // Set before the properties are read, so that a schema referring to itself ends.
    this.models.set(name, model);
    const required = new Set(Array.isArray(schema.required) ? schema.required : []);
    for (const [jsonName, property] of Object.entries(schema.properties)) {
      if (!isObject(property)) throw new Error(`${name}.${jsonName}: not a schema`);
      model.fields.push({
        jsonName,
        pyName: pythonName(jsonName),
        type: this.type(property, `${name}${pascal(pythonName(jsonName))}`),
        required: required.has(jsonName),
        description: stringAt(property, 'description'),
      });
    }
    return name;
  }

  /** The Python type of `schema`; `context` names a class made for an inline object. */
  type(schema: JsonObject, context: string): PyType {
    if (typeof schema.$ref === 'string')
      return { kind: 'model', name: this.component(this.#resolve(schema.$ref).name) };
    if ('const' in schema) return { kind: 'plain', annotation: `Literal[${pythonLiteral(schema.const)}]` };
    if (Array.isArray(schema.enum))
      return { kind: 'plain', annotation: `Literal[${schema.enum.map(pythonLiteral).join(', ')}]` };
    const options = Array.isArray(schema.anyOf)
      ? schema.anyOf
      : Array.isArray(schema.oneOf)
        ? schema.oneOf
        : null;
    if (options !== null) return this.#anyOf(options.filter(isObject), context);
    switch (schema.type) {
      case 'string':
        return { kind: 'plain', annotation: 'str' };
      case 'integer':
        return { kind: 'plain', annotation: 'int' };
      case 'number':
        return { kind: 'plain', annotation: 'float' };
      case 'boolean':
        return { kind: 'plain', annotation: 'bool' };
      case 'null':
        return { kind: 'plain', annotation: 'None' };
      case 'array':
        return { kind: 'list', item: this.type(objectAt(schema, 'items'), `${context}Item`) };
      case 'object':
        return { kind: 'model', name: this.model(context, schema) };
      default:
        throw new Error(`${context}: unsupported schema ${JSON.stringify(schema)}`);
    }
  }

  #anyOf(options: JsonObject[], context: string): PyType {
    const nullable = options.some((option) => option.type === 'null');
    const rest = options.filter((option) => option.type !== 'null');
    let inner: PyType;
    if (rest.length === 1 && rest[0] !== undefined) inner = this.type(rest[0], context);
    else if (rest.every((option) => 'const' in option))
      inner = {
        kind: 'plain',
        annotation: `Literal[${rest.map((option) => pythonLiteral(option.const)).join(', ')}]`,
      };
    else if (rest.every((option) => typeof option.$ref === 'string')) inner = this.#union(rest, context);
    else throw new Error(`${context}: unsupported anyOf ${JSON.stringify(options)}`);
    return nullable ? { kind: 'optional', inner } : inner;
  }

  /** A union of component schemas, told apart by the one property that is a constant in each. */
  #union(options: JsonObject[], context: string): PyType {
    const members = options.map((option) => this.#resolve(String(option.$ref)));
    const constants = members.map(({ schema }) =>
      Object.entries(isObject(schema.properties) ? schema.properties : {}).flatMap(([key, property]) =>
        isObject(property) && typeof property.const === 'string' ? [[key, property.const] as const] : [],
      ),
    );
    const discriminator = constants[0]?.find(([key]) =>
      constants.every((pairs) => pairs.some(([other]) => other === key)),
    )?.[0];
    if (discriminator === undefined) throw new Error(`${context}: a union without a constant property`);
    const name = commonSuffix(members.map(({ name }) => name)) ?? context;
    if (!this.unions.has(name))
      this.unions.set(name, {
        name,
        discriminator,
        members: members.map(({ name: model }, i) => ({
          value: constants[i]?.find(([key]) => key === discriminator)?.[1] ?? '',
          model: this.component(model),
        })),
      });
    return { kind: 'union', name };
  }
}

/** `IncidentChange`, `UserChange` → `Change`: the last capitalized words the names share. */
function commonSuffix(names: string[]): string | null {
  const words = names.map((name) => name.match(/[A-Z][a-z0-9]*/g) ?? []);
  const shared: string[] = [];
  for (let i = 1; ; i += 1) {
    const word = words[0]?.at(-i);
    if (word === undefined || !words.every((list) => list.length > i && list.at(-i) === word)) break;
    shared.unshift(word);
  }
  return shared.length === 0 ? null : shared.join('');
}

function annotation(type: PyType): string {
  switch (type.kind) {
    case 'plain':
      return type.annotation;
    case 'model':
    case 'union':
      return type.name;
    case 'list':
      return `list[${annotation(type.item)}]`;
    case 'optional':
      return `${annotation(type.inner)} | None`;
  }
}

/** A function reading a value of `type` from parsed JSON. */
function readerFunction(type: PyType): string {
  switch (type.kind) {
    case 'model':
      return `${type.name}.from_dict`;
    case 'union':
      return `${snakeCase(type.name)}_from_dict`;
    default:
      return `lambda item: ${reader(type, 'item')}`;
  }
}

/** An expression reading `value` (parsed JSON) as `type`. */
function reader(type: PyType, value: string): string {
  switch (type.kind) {
    case 'plain':
      return value;
    case 'model':
    case 'union':
      return `${readerFunction(type)}(${value})`;
    case 'list':
      return type.item.kind === 'plain'
        ? `list(${value})`
        : `[${reader(type.item, 'item')} for item in ${value}]`;
    case 'optional':
      return type.inner.kind === 'plain' ? value : `_optional(${value}, ${readerFunction(type.inner)})`;
  }
}

const snakeCase = (name: string) => pythonName(name);

/** Comment lines of at most `width` characters, words kept whole. */
function wrap(text: string, indent: string, width = 100): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.replace(/\s+/g, ' ').trim().split(' ')) {
    if (line !== '' && indent.length + 3 + line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') lines.push(line);
  return lines.map((text) => `${indent}#: ${text}`);
}

/** A docstring's text: no quote run or backslash can end or escape it. */
const docstring = (text: string) =>
  text.replace(/\s+/g, ' ').trim().replaceAll('\\', '\\\\').replaceAll('"""', '\\"\\"\\"');

function modelSource(model: Model): string {
  // Required fields first: a dataclass field without a default may not follow one with a default.
  const fields = [...model.fields.filter((f) => f.required), ...model.fields.filter((f) => !f.required)];
  const lines = [
    '@dataclass(frozen=True, slots=True, kw_only=True)',
    `class ${model.name}(_Model):`,
    `    """${docstring(model.description ?? `\`${model.name}\` of the OpenAPI document's schemas.`)}"""`,
    '',
  ];
  for (const field of fields) {
    if (field.description !== undefined) lines.push(...wrap(field.description, '    '));
    const type = annotation(field.type);
    lines.push(
      field.required ? `    ${field.pyName}: ${type}` : `    ${field.pyName}: ${type} | None = None`,
    );
  }
  lines.push(
    '',
    '    @classmethod',
    `    def from_dict(cls, data: Mapping[str, Any]) -> ${model.name}:`,
    '        """From its JSON object; properties this version does not know are ignored."""',
    '        return cls(',
    ...fields.map((field) => {
      const value = field.required
        ? `data[${JSON.stringify(field.jsonName)}]`
        : `data.get(${JSON.stringify(field.jsonName)})`;
      const type: PyType = field.required ? field.type : { kind: 'optional', inner: field.type };
      return `            ${field.pyName}=${reader(type, value)},`;
    }),
    '        )',
    '',
    '    def to_dict(self) -> dict[str, Any]:',
    '        """The JSON object, with the API\'s property names."""',
    '        return {',
    ...model.fields.map((field) => {
      const value = field.type.kind === 'plain' ? `self.${field.pyName}` : `_dump(self.${field.pyName})`;
      return `            ${JSON.stringify(field.jsonName)}: ${value},`;
    }),
    '        }',
  );
  return lines.join('\n');
}

function unionSource(union: Union): string {
  const function_ = `${snakeCase(union.name)}_from_dict`;
  const values = union.members.map(({ value }) => pythonLiteral(value)).join(', ');
  const known = union.members.map(({ value }) => value).join(', ');
  return [
    `${union.name}: TypeAlias = Union[${union.members.map(({ model }) => model).join(', ')}]`,
    `${union.name}Type: TypeAlias = Literal[${values}]`,
    '',
    '',
    `def ${function_}(data: Mapping[str, Any]) -> ${union.name}:`,
    `    """A \`${union.name}\`, of the class its \`${union.discriminator}\` names."""`,
    `    kind = data[${JSON.stringify(union.discriminator)}]`,
    ...union.members.flatMap(({ value, model }) => [
      `    if kind == ${pythonLiteral(value)}:`,
      `        return ${model}.from_dict(data)`,
    ]),
    '    raise ValueError(',
    `        f"unknown ${union.name} ${union.discriminator} {kind!r}: "`,
    `        "this version of the client knows ${known}"`,

    '    )',
  ].join('\n');
}

/** The GET operations of the public and wider API: operationId → path. */
function operations(document: unknown): Map<string, { path: string; operation: JsonObject }> {
  const found = new Map<string, { path: string; operation: JsonObject }>();
  for (const [path, item] of Object.entries(objectAt(document, 'paths'))) {
    const operation = isObject(item) ? item.get : undefined;
    if (!path.startsWith('/api/') || !isObject(operation)) continue;
    const id = stringAt(operation, 'operationId');
    if (id === undefined) throw new Error(`GET ${path} has no operationId`);
    found.set(id, { path, operation });
  }
  return found;
}

export function pythonModels(document: unknown): string {
  const generator = new Generator(document);
  for (const name of ROOT_SCHEMAS) generator.component(name);
  const found = operations(document);
  for (const [operationId, name] of Object.entries(RESULT_MODELS)) {
    const operation = found.get(operationId)?.operation;
    if (operation === undefined) throw new Error(`the OpenAPI document has no GET operation ${operationId}`);
    const body = objectAt(operation, 'responses', '200', 'content', 'application/json', 'schema');
    const properties = objectAt(body, 'properties');
    // The public API's envelope holds the result in `data`; the wider API's body is the result.
    const result = 'error' in properties ? objectAt(properties, 'data') : body;
    generator.model(name, result, `The result of \`${operationId}\` (GET ${found.get(operationId)?.path}).`);
  }
  const info = objectAt(document, 'info');
  const errorCodes = objectAt(document, 'components', 'schemas', 'CodedError', 'properties', 'error').enum;
  if (!Array.isArray(errorCodes)) throw new Error('the CodedError schema has no enum of error codes');
  return [
    '# Generated from the OpenAPI document the server serves (its `info.version`:',
    `# ${JSON.stringify(stringAt(info, 'version') ?? '')}) by packages/python/scripts/generate.ts. Do not edit:`,
    '# run `node packages/python/scripts/generate.ts`; test/python/generated.test.ts fails',
    '# when this file is stale.',
    '"""The records of the Safety Incident API as typed dataclasses, from its OpenAPI document."""',
    '',
    'from __future__ import annotations',
    '',
    'from collections.abc import Callable, Mapping',
    'from dataclasses import dataclass',
    'from typing import Any, Final, Literal, TypeAlias, TypeVar, Union, cast',
    '',
    '_T = TypeVar("_T")',
    '',
    '',
    'class _Model:',
    '    """What every generated class has: `to_dict()`, the JSON object with the API\'s names."""',
    '',
    '    __slots__ = ()',
    '',
    '    def to_dict(self) -> dict[str, Any]:',
    '        raise NotImplementedError',
    '',
    '',
    'def _dump(value: Any) -> Any:',
    '    if isinstance(value, _Model):',
    '        return value.to_dict()',
    '    if isinstance(value, list):',
    '        return [_dump(item) for item in cast("list[Any]", value)]',

    '    return value',
    '',
    '',
    'def _optional(value: Any, read: Callable[[Any], _T]) -> _T | None:',
    '    return None if value is None else read(value)',
    '',
    '',
    '#: The path of each GET operation of the API, by its `operationId`.',
    'PATHS: Final[dict[str, str]] = {',
    ...[...found].map(([id, { path }]) => `    ${JSON.stringify(id)}: ${JSON.stringify(path)},`),
    '}',
    '',
    "#: Every code the API puts in an error's `error` field (the enum of its `CodedError` schema).",
    'ERROR_CODES: Final[tuple[str, ...]] = (',
    ...errorCodes.map((code) => `    ${pythonLiteral(code)},`),
    ')',
    ...[...generator.models.values()].flatMap((model) => ['', '', modelSource(model)]),
    ...[...generator.unions.values()].flatMap((union) => ['', '', unionSource(union)]),
    '',
  ].join('\n');
}

/** The text of src/safety_incident_api/models.py for the document the server serves now. */
export async function generatedModels(): Promise<string> {
  return pythonModels(await openApiDocument());
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(GENERATED_FILE, await generatedModels());
}
