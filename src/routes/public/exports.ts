import { pipeline } from 'node:stream';
import { constants, createGzip } from 'node:zlib';
import { Type } from 'typebox';
import { HEADERS, TAGS } from '../../schemas/openapi.ts';
import {
  DEPARTMENT_EXAMPLE,
  INCIDENT_EXAMPLE,
  LOCATION_EXAMPLE,
  USER_EXAMPLE,
} from '../../schemas/public.ts';
import { EXPORT_FORMATS, EXPORT_RESOURCES, exportFile } from '../../services/export-service.ts';
import type { PublicRoutes } from './response-cache.ts';

const CONTENT_TYPES = {
  ndjson: 'application/x-ndjson; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
} as const;

const capitalized = (word: string) => `${word[0]?.toUpperCase()}${word.slice(1)}`;

/** NDJSON, the format a program reads, is the plain `exportIncidents`; CSV, for spreadsheets, says so. */
const OPERATION_IDS = {
  ndjson: (resource: string) => `export${capitalized(resource)}`,
  csv: (resource: string) => `export${capitalized(resource)}Csv`,
};

const EXAMPLES = {
  incidents: INCIDENT_EXAMPLE,
  users: USER_EXAMPLE,
  departments: DEPARTMENT_EXAMPLE,
  locations: LOCATION_EXAMPLE,
};

/**
 * Level 1: an export is large and streamed once, and repetitive enough (the same keys and values on
 * every line) that the fastest level already shrinks it several times over.
 */
const GZIP_LEVEL = constants.Z_BEST_SPEED;

/**
 * Whether `Accept-Encoding` (RFC 9110 §12.5.3) admits gzip: named (or `x-gzip`), or else `*`, with
 * a weight above 0; `gzip;q=0` refuses it.
 */
export function acceptsGzip(header: string | undefined): boolean {
  if (header === undefined) return false;
  let wildcard = false;
  for (const entry of header.split(',')) {
    const [coding = '', ...parameters] = entry.split(';').map((part) => part.trim().toLowerCase());
    const weight = parameters.find((parameter) => parameter.startsWith('q='));
    const accepted = weight === undefined || Number(weight.slice(2)) > 0;
    if (coding === 'gzip' || coding === 'x-gzip') return accepted;
    if (coding === '*') wildcard = accepted;
  }
  return wildcard;
}

/**
 * `/exports/{incidents,users,departments,locations}.{ndjson,csv}`: the whole current set, streamed
 * from one snapshot, with the feed position of that snapshot in `X-Changes-Cursor`. Not cached:
 * the body is never held whole. Any other name under /exports is the API's 404.
 */
export const exportRoutes: PublicRoutes = async (app) => {
  for (const resource of EXPORT_RESOURCES) {
    for (const format of EXPORT_FORMATS) {
      const file = `${resource}.${format}`;
      app.get(
        `/exports/${file}`,
        {
          schema: {
            operationId: OPERATION_IDS[format](resource),
            tags: [TAGS.exports.name],
            summary: `Every ${resource === 'incidents' ? 'incident' : `active ${resource.slice(0, -1)}`} as ${format === 'csv' ? 'CSV' : 'NDJSON'}, from one snapshot`,
            description:
              "The whole current set in one streamed response, in the list endpoint's order and field names, counted as one request. `X-Changes-Cursor` is the changes-feed position of the snapshot: continue with `/changes?cursor=…` and lose nothing. Compressed with gzip when `Accept-Encoding` allows it.",
          },
          config: {
            openapi: {
              responses: {
                200: {
                  description:
                    format === 'csv'
                      ? 'RFC 4180 CSV (UTF-8, CRLF): a header row of the field names, then one row per record; null is an empty field'
                      : `One JSON object per record and line (LF): a \`${capitalized(resource).slice(0, -1)}\`, as the list endpoint renders it`,
                  headers: [HEADERS.changesCursor],
                  content: {
                    [CONTENT_TYPES[format].split(';')[0] as string]: {
                      schema: Type.String(),
                      example: exportFile(resource, format, [EXAMPLES[resource]]),
                    },
                  },
                },
              },
            },
          },
        },
        async (request, reply) => {
          const { cursor, body } = await app.services.exports.open(
            request.apiKey.account_id,
            resource,
            format,
          );
          // The snapshot is open: the stream that follows has the snapshot's own limits, not what
          // is left of the request's budget.
          request.storeBudget.end();
          reply
            .header('content-type', CONTENT_TYPES[format])
            .header('content-disposition', `attachment; filename="${file}"`)
            .header('x-changes-cursor', cursor)
            .header('vary', 'Accept-Encoding');
          // HEAD: the headers only. Fastify would read a body stream to its end to discard it.
          if (request.method === 'HEAD') return reply.send(body.destroy());
          if (!acceptsGzip(request.headers['accept-encoding'])) return reply.send(body);
          reply.header('content-encoding', 'gzip');
          // Destroying the gzip stream (the client went away) destroys `body` too, which releases
          // the snapshot; a failure of either ends the response, as Fastify logs.
          return reply.send(pipeline(body, createGzip({ level: GZIP_LEVEL }), () => {}));
        },
      );
    }
  }
};
