import { html, type SafeHtml } from '../lib/html.ts';
import { ADMIN_ASSETS_PATH } from '../paths.ts';

/**
 * `/docs`: the OpenAPI document as one server-rendered HTML page, operations grouped by tag. It
 * reads only the document, so the page shows exactly what `/openapi.json` says. Styles are the
 * admin panel's stylesheet, served by the product (no CDN, no script).
 */

type Json = Record<string, unknown>;

const isRecord = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const record = (value: unknown): Json => (isRecord(value) ? value : {});

const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

/** `#/components/schemas/Incident` → `Incident`. */
const refName = (ref: string): string => ref.slice(ref.lastIndexOf('/') + 1);

const schemaAnchor = (name: string): string => `schema-${name}`;

const tagAnchor = (name: unknown): string => `tag-${String(name).replace(/\W+/g, '-')}`;

/** A schema in a few words, with components as links to their field tables. */
function typeOf(schema: unknown): SafeHtml {
  const node = record(schema);
  const ref = text(node.$ref);
  if (ref !== undefined) return html`<a href="#${schemaAnchor(refName(ref))}">${refName(ref)}</a>`;
  const alternatives = node.anyOf ?? node.oneOf;
  if (Array.isArray(alternatives)) {
    return html`${alternatives.map((alternative, i) => html`${i > 0 ? ' | ' : ''}${typeOf(alternative)}`)}`;
  }
  if ('const' in node) return html`<code>${JSON.stringify(node.const)}</code>`;
  if (node.type === 'array') return html`array of ${typeOf(node.items)}`;
  const format = text(node.format);
  return html`${text(node.type) ?? 'any'}${format === undefined ? '' : ` (${format})`}`;
}

/** What a schema adds to its type: limits, default, description. */
function notes(schema: unknown): string {
  const node = record(schema);
  const parts = [
    typeof node.minimum === 'number' ? `minimum ${node.minimum}` : '',
    typeof node.maximum === 'number' ? `maximum ${node.maximum}` : '',
    'default' in node ? `default ${JSON.stringify(node.default)}` : '',
    text(node.description) ?? '',
  ];
  return parts.filter((part) => part !== '').join('; ');
}

/** The fields of an object schema; inline objects (envelopes) are expanded beneath their field. */
function fields(schema: unknown, depth = 0): SafeHtml | null {
  const node = record(schema);
  const properties = record(node.properties);
  const names = Object.keys(properties);
  if (names.length === 0 || depth > 3) return null;
  const required = Array.isArray(node.required) ? node.required : [];
  return html`<table>
<thead><tr><th>Field</th><th>Type</th><th>Required</th><th>Notes</th></tr></thead>
<tbody>${names.map(
    (name) =>
      html`<tr><td><code>${name}</code></td><td>${typeOf(properties[name])}${fields(properties[name], depth + 1)}</td><td>${required.includes(name) ? 'yes' : 'no'}</td><td>${notes(properties[name])}</td></tr>`,
  )}</tbody>
</table>`;
}

function examples(media: Json): SafeHtml[] {
  const named = Object.entries(record(media.examples)).map(([name, example]) => ({
    name,
    value: record(example).value,
  }));
  const all = 'example' in media ? [{ name: 'example', value: media.example }, ...named] : named;
  return all.map(
    ({ name, value }) =>
      html`<p class="muted">Example <code>${name}</code></p><pre><code>${typeof value === 'string' ? value : JSON.stringify(value, null, 2)}</code></pre>`,
  );
}

/** The first of a component's `examples`. */
function schemaExample(schema: unknown): SafeHtml[] {
  const all = record(schema).examples;
  return Array.isArray(all) && all.length > 0 ? examples({ example: all[0] }) : [];
}

function responseBlock(document: Json, status: string, response: unknown): SafeHtml {
  const components = record(document.components);
  // Responses every operation of a surface shares are described once in the components.
  const shared = text(record(response).$ref);
  const { description, headers, content } = record(
    shared === undefined ? response : record(components.responses)[refName(shared)],
  );
  const componentHeaders = record(components.headers);
  const headerRows = Object.entries(record(headers)).map(([name, header]) => {
    const resolved = record(componentHeaders[refName(text(record(header).$ref) ?? '')] ?? header);
    return html`<tr><td><code>${name}</code></td><td>${typeOf(resolved.schema)}</td><td>${text(resolved.description)}</td></tr>`;
  });
  const bodies = Object.entries(record(content)).map(([mediaType, media]) => {
    const schema = record(media).schema;
    return html`<p>Body <code>${mediaType}</code>: ${typeOf(schema)}</p>${fields(schema)}${examples(record(media))}`;
  });
  return html`<div class="card">
<h4><span class="badge">${status}</span> ${text(description)}</h4>
${headerRows.length > 0 ? html`<table><thead><tr><th>Header</th><th>Type</th><th>Meaning</th></tr></thead><tbody>${headerRows}</tbody></table>` : null}
${bodies.length > 0 ? bodies : html`<p class="muted">No body.</p>`}
</div>`;
}

/** The body a webhook event sends (operations the service serves take none). */
function requestBlock(operation: Json): SafeHtml | null {
  const content = Object.entries(record(record(operation.requestBody).content));
  if (content.length === 0) return null;
  return html`<h4>Request body</h4>
${content.map(([mediaType, media]) => {
  const schema = record(media).schema;
  return html`<p>Body <code>${mediaType}</code>: ${typeOf(schema)}</p>${fields(schema)}${examples(record(media))}`;
})}`;
}

function operationBlock(document: Json, path: string, method: string, operation: Json): SafeHtml {
  const id = text(operation.operationId) ?? `${method}-${path}`;
  const parameters = Array.isArray(operation.parameters) ? operation.parameters.map(record) : [];
  const security = Array.isArray(operation.security) ? operation.security.map(record) : [];
  const credentials = security.flatMap((requirement) =>
    Object.entries(requirement).map(([scheme, scopes]) =>
      Array.isArray(scopes) && scopes.length > 0 ? `${scheme} (${scopes.join(', ')})` : scheme,
    ),
  );
  return html`<section class="card" id="${id}">
<h3><span class="badge">${method.toUpperCase()}</span> <code>${path}</code></h3>
<p><strong>${text(operation.summary)}</strong> · operationId <code>${id}</code>${credentials.length > 0 ? ` · credential: ${credentials.join(' or ')}` : ''}</p>
${text(operation.description) === undefined ? null : html`<p>${text(operation.description)}</p>`}
${
  parameters.length > 0
    ? html`<h4>Parameters</h4><table><thead><tr><th>Name</th><th>In</th><th>Type</th><th>Required</th><th>Notes</th></tr></thead><tbody>${parameters.map(
        (parameter) =>
          html`<tr><td><code>${text(parameter.name)}</code></td><td>${text(parameter.in)}</td><td>${typeOf(parameter.schema)}</td><td>${parameter.required === true ? 'yes' : 'no'}</td><td>${[text(parameter.description), notes(parameter.schema)].filter(Boolean).join('; ')}</td></tr>`,
      )}</tbody></table>`
    : null
}
${requestBlock(operation)}
<h4>Responses</h4>
${Object.entries(record(operation.responses))
  // By status: `2XX` before `410` (JSON objects list integer-like keys first), `default` last.
  .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  .map(([status, response]) => responseBlock(document, status, response))}
</section>`;
}

export function docsPage(document: Json): string {
  const info = record(document.info);
  // Paths, then the webhooks (the requests the service sends), keyed by their event type.
  const operations = [record(document.paths), record(document.webhooks)].flatMap((items) =>
    Object.entries(items).flatMap(([path, item]) =>
      METHODS.filter((method) => method in record(item)).map((method) => ({
        path,
        method,
        operation: record(record(item)[method]),
      })),
    ),
  );
  const tags = Array.isArray(document.tags) ? document.tags.map(record) : [];
  const schemas = Object.entries(record(record(document.components).schemas));
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${text(info.title)} reference</title>
<link rel="stylesheet" href="${ADMIN_ASSETS_PATH}/admin.css">
</head>
<body>
<a class="skip-link" href="#main">Skip to content</a>
<header class="site-header"><a class="brand" href="/docs">${text(info.title)} · Reference</a></header>
<main id="main" tabindex="-1">
<h1>${text(info.title)} <span class="muted">version ${text(info.version)}</span></h1>
<p>${text(info.description)}</p>
<p>The machine-readable document: <a href="/openapi.json">/openapi.json</a> (OpenAPI 3.1).</p>
<nav aria-label="Contents"><ul>${tags.map((tag) => html`<li><a href="#${tagAnchor(tag.name)}">${text(tag.name)}</a></li>`)}<li><a href="#schemas">Schemas</a></li></ul></nav>
${tags.map(
  (tag) => html`<h2 id="${tagAnchor(tag.name)}">${text(tag.name)}</h2>
<p>${text(tag.description)}</p>
${operations
  .filter(({ operation }) => Array.isArray(operation.tags) && operation.tags.includes(tag.name))
  .map(({ path, method, operation }) => operationBlock(document, path, method, operation))}`,
)}
<h2 id="schemas">Schemas</h2>
${schemas.map(
  ([name, schema]) => html`<section class="card" id="${schemaAnchor(name)}">
<h3>${name}</h3>
<p>${typeOf(schema)}${text(record(schema).description) === undefined ? '' : ` · ${text(record(schema).description)}`}</p>
${fields(schema)}
${schemaExample(schema)}
</section>`,
)}
</main>
</body>
</html>`.toString();
}
