import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { constants, gzip } from 'node:zlib';

/**
 * Scalar's standalone browser bundle, which `/docs` loads: one self-contained script (its
 * stylesheet included, about 4 MB), taken from the installed package so that the page depends on
 * no CDN and shows the version the lockfile pins.
 */
const BUNDLE = new URL('browser/standalone.js', import.meta.resolve('@scalar/api-reference'));

export interface DocsScript {
  /**
   * The file name under `/docs/`, with a hash of the content: a new bundle gets a new URL, so
   * browsers may keep the script for good and never ask for it again.
   */
  name: string;
  body: Buffer;
  /**
   * The app has no compression of its own, and this one file is 4 MB of text (1.3 MB gzipped):
   * compressed once, off the event loop, as soon as the bundle is read.
   */
  gzipped: Promise<Buffer>;
}

let script: Promise<DocsScript> | undefined;

async function load(): Promise<DocsScript> {
  const body = await readFile(BUNDLE);
  const hash = createHash('sha256').update(body).digest('hex').slice(0, 16);
  const gzipped = promisify(gzip)(body, { level: constants.Z_BEST_COMPRESSION });
  return { name: `scalar-${hash}.js`, body, gzipped };
}

/** Read when `/docs` is first asked for, not at start: most processes never serve it. */
export function docsScript(): Promise<DocsScript> {
  script ??= load();
  return script;
}

/**
 * Whether `Accept-Encoding` admits gzip (RFC 9110 §12.5.3): named or covered by `*`, with a
 * weight above 0. No header, or one without either, asks for the identity encoding.
 */
export function acceptsGzip(header: string | undefined): boolean {
  const weights = new Map(
    (header ?? '').split(',').map((part) => {
      const [coding = '', ...params] = part.split(';').map((piece) => piece.trim());
      const q = params.find((param) => /^q=/i.test(param));
      return [coding.toLowerCase(), q === undefined ? 1 : Number(q.slice(2))];
    }),
  );
  return (weights.get('gzip') ?? weights.get('*') ?? 0) > 0;
}
