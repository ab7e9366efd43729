import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local OTLP/HTTP collector for the tests, JSON protocol only: it keeps every span POSTed to
 * /v1/traces, flattened, and the raw bodies (to search them for secrets).
 */

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** OTLP's numbers: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  status: { code?: number; message?: string };
  resource: Record<string, string | number | boolean>;
}

interface AnyValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}
type KeyValue = { key: string; value: AnyValue };

const valueOf = (value: AnyValue) =>
  value.stringValue ?? value.boolValue ?? value.doubleValue ?? Number(value.intValue);
const attributesOf = (list: KeyValue[] = []) =>
  Object.fromEntries(list.map(({ key, value }) => [key, valueOf(value)]));

export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  bodies: string[];
  /** Content types of the exports received. */
  contentTypes: string[];
  /** Resolves with the spans once `found` holds for them; rejects after `withinMs`. */
  waitFor(found: (spans: ReceivedSpan[]) => boolean, withinMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const bodies: string[] = [];
  const contentTypes: string[] = [];
  let changed = () => {};
  const server: Server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => {
      body += chunk;
    });
    request.on('end', () => {
      contentTypes.push(request.headers['content-type'] ?? '');
      bodies.push(body);
      if (request.url === '/v1/traces' && request.headers['content-type'] === 'application/json') {
        const parsed = JSON.parse(body) as {
          resourceSpans?: {
            resource?: { attributes?: KeyValue[] };
            scopeSpans?: {
              spans?: (Omit<ReceivedSpan, 'attributes' | 'resource'> & { attributes?: KeyValue[] })[];
            }[];
          }[];
        };
        for (const resourceSpans of parsed.resourceSpans ?? []) {
          const resource = attributesOf(resourceSpans.resource?.attributes);
          for (const scope of resourceSpans.scopeSpans ?? []) {
            for (const span of scope.spans ?? []) {
              spans.push({
                ...span,
                parentSpanId: span.parentSpanId ?? '',
                attributes: attributesOf(span.attributes),
                status: span.status ?? {},
                resource,
              });
            }
          }
        }
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      changed();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    bodies,
    contentTypes,
    waitFor(found, withinMs = 30_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          changed = () => {};
          reject(new Error(`spans not received in time; got: ${spans.map((s) => s.name).join(', ')}`));
        }, withinMs);
        const check = () => {
          if (!found(spans)) return;
          clearTimeout(timer);
          changed = () => {};
          resolve(spans);
        };
        changed = check;
        check();
      });
    },
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}
