import type { ReferenceProps } from '@scalar/api-reference';
import { html } from '../lib/html.ts';

/**
 * `/docs`: Scalar's API reference (`@scalar/api-reference`, served by the product from its own
 * copy of the package, see docs-script.ts) rendering `/openapi.json`. The page is a shell: the
 * configuration travels as data in Scalar's HTML API (`#api-reference[data-configuration]`), so
 * the page runs no inline script and `script-src 'self'` holds.
 */

/**
 * One document's configuration, as Scalar's HTML API reads it (the package exports the type only
 * as its component's props).
 */
type ScalarConfiguration = Exclude<NonNullable<ReferenceProps['configuration']>, unknown[]>;

/**
 * Corrections to Scalar's markup and light theme for WCAG 2.1 AA, found by axe-core
 * (test/browser/docs.test.ts). Unlayered, so they win over Scalar's theme and base styles, which
 * are in cascade layers; its utility classes are not, and are outweighed by a selector under
 * `.scalar-app` with one class or element more.
 * - Text colours: the theme's greys and method colours have a contrast below 4.5:1 on its
 *   backgrounds (light: #8e8e8e on white is 3.3:1; dark: #797979 on #151515 is 4.2:1); these are
 *   shades of the same hues, darker on light and lighter on dark.
 * - Copy buttons of code blocks: Scalar shows their label to assistive technology only while the
 *   block is hovered or focused, so they have no name otherwise; always "Copy", the last part
 *   of the label (some blocks put their language before it).
 * - Lists of a tag's endpoints: a long path made the list scroll sideways, a scrolling region
 *   that a keyboard cannot reach; the path wraps instead.
 * And for the layout (test/browser/docs-layout.test.ts measures both at 1440 and 390 px wide):
 * - Code panels (request samples, example answers, the guides' examples): long lines wrap
 *   instead of running past the panel's edge, where Scalar hides its scrollbars until hovered
 *   (and an example answer's panel grew past the card, taking its copy button out of sight).
 * - The status tabs of the example answers: they wrap onto another row instead of scrolling out
 *   of a strip that, at phone width, showed only the first five.
 */
const SCALAR_CSS = `
.light-mode {
  --scalar-color-2: #595959;
  --scalar-color-3: #666666;
  --scalar-color-blue: #0069ab;
  --scalar-color-green: #007a4d;
  --scalar-color-orange: #b84a00;
  --scalar-color-red: #c20006;
  --scalar-color-yellow: #7a6000;
}
.dark-mode {
  --scalar-color-3: #959595;
}
.scalar-code-copy .sr-only > .hidden { display: inline; }
.scalar-code-copy .sr-only > .hidden > :not(:last-child) { display: none; }
.endpoints .endpoint { white-space: normal; }
.endpoints .endpoint-path { min-width: 0; overflow-wrap: anywhere; }
.scalar-app .scalar-code-block pre,
.scalar-app .markdown pre code.hljs { width: auto; white-space: pre-wrap; overflow-wrap: anywhere; }
.scalar-app pre code * { white-space: inherit; overflow-wrap: inherit; }
.scalar-app pre code.hljs .line {
  --gutter: calc(var(--line-digits) * 1ch + .875rem);
  display: block; padding-left: var(--gutter); text-indent: calc(-1 * var(--gutter));
}
.scalar-app pre code.hljs .line::before { text-indent: 0; }
.scalar-app .response-card .scalar-card-content > * { min-width: 0; }
.scalar-app .response-card .scalar-card-header-title { overflow: visible; white-space: normal; }
.scalar-app .response-card .tab-list { flex-wrap: wrap; overflow: visible; }
`;

/**
 * What the reader gets: the sidebar, search and schemas (Scalar's defaults, stated so that an
 * upgrade that changes them does not hide them), request samples (the document's own
 * `x-codeSamples`, curl first, then the TypeScript SDK, and of those Scalar
 * generates only JavaScript's fetch), and
 * nothing that reaches another host: no web fonts (fonts.scalar.com), no request client (it
 * offers Scalar's proxy and OAuth helpers), no AI agent or MCP panel, no developer toolbar (it
 * shares documents to Scalar's registry). All of these would also be refused by the page's CSP.
 */
const SCALAR_CONFIGURATION = {
  url: '/openapi.json',
  showSidebar: true,
  hideSearch: false,
  hideModels: false,
  modelsSectionLabel: 'Schemas',
  // Fields in the document's order, which is the order of the API's answers, not alphabetical.
  orderSchemaPropertiesBy: 'preserve',
  showOperationId: true,
  withDefaultFonts: false,
  hideClientButton: true,
  hideTestRequestButton: true,
  showDeveloperTools: 'never',
  agent: { disabled: true },
  mcp: { disabled: true },
  documentDownloadType: 'direct',
  // Every operation on the page at once, as a reference of this size can afford: the browser's
  // own find works, and there is no "Show More" button (Scalar labels it "Show all … endpoints",
  // which is not what it shows: a mismatch axe-core reports).
  defaultOpenAllTags: true,
  customCss: SCALAR_CSS,
  // Scalar takes a list of what to hide: every generated client but JavaScript's fetch. Its curl
  // would repeat the document's own; with that hidden, the document's first sample (curl) is
  // the one shown. The browser test checks what is offered, in that order.
  hiddenClients: {
    c: true,
    clojure: true,
    csharp: true,
    dart: true,
    fsharp: true,
    go: true,
    http: true,
    java: true,
    js: ['axios', 'jquery', 'ofetch', 'xhr'],
    julia: true,
    kotlin: true,
    node: true,
    objc: true,
    ocaml: true,
    php: true,
    powershell: true,
    python: true,
    r: true,
    ruby: true,
    rust: true,
    shell: true,
    swift: true,
  },
} satisfies ScalarConfiguration;

/**
 * The page's policy, the least that Scalar works with (test/browser/docs.test.ts fails on any
 * violation). Scripts: the product's own only, Scalar's bundle (no inline script, no eval; Zod
 * inside it probes whether eval is allowed, is refused and does without). Requests: the product
 * only, for the document. Images: `data:` only, for the page's empty icon (without it the browser
 * asks for /favicon.ico). No fonts, no framing, no forms, no `<base>`.
 * Styles: inline ones only, which a nonce cannot admit here: Scalar puts its theme and its
 * toasts' styles in `<style>` elements without the nonce (only its main stylesheet takes one),
 * measures the scrollbar with a `style` attribute, and numbers code lines with `style` attributes
 * in markup. Hashes would change with every Scalar release and cannot admit attributes that vary.
 * What an injected style could do harm with, loading from another host, the other directives
 * refuse.
 */
export const DOCS_PAGE_HEADERS = {
  'content-security-policy': [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'unsafe-inline'",
    'img-src data:',
    "connect-src 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; '),
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
};

export function docsPage({ title, scriptPath }: { title: string; scriptPath: string }): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} reference</title>
<link rel="icon" href="data:,">
</head>
<body>
<noscript><p>This reference needs JavaScript. The document it renders:
<a href="${SCALAR_CONFIGURATION.url}">${SCALAR_CONFIGURATION.url}</a> (OpenAPI 3.1).</p></noscript>
<script id="api-reference" type="application/json"
  data-configuration="${JSON.stringify(SCALAR_CONFIGURATION)}"></script>
<script src="${scriptPath}"></script>
</body>
</html>`.toString();
}
