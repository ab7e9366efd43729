import { pipeline, type Readable } from 'node:stream';
import { constants, createGzip } from 'node:zlib';
import { Type } from 'typebox';
import { publicErrorResponses } from '../../schemas/public.ts';
import { EXPORT_FORMATS, EXPORT_RESOURCES, exportService } from '../../services/export-service.ts';
import type { PublicRoutes } from './response-cache.ts';

const CONTENT_TYPES = {
  ndjson: 'application/x-ndjson; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
} as const;

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
            summary: `Export every ${resource === 'incidents' ? 'incident' : `active ${resource.slice(0, -1)}`} as ${format === 'csv' ? 'CSV' : 'NDJSON'}, from one snapshot`,
            response: {
              // A stream, never serialized: its bytes are the file.
              200: Type.Unsafe<Readable>({
                type: 'string',
                description:
                  format === 'csv'
                    ? 'RFC 4180 CSV (UTF-8, CRLF): a header row of the field names, then one row per record; null is an empty field'
                    : 'One JSON object per record and line (LF)',
              }),
              ...publicErrorResponses,
            },
          },
        },
        async (request, reply) => {
          const { cursor, body } = await exportService.open(
            app.db,
            request.apiKey.account_id,
            resource,
            format,
          );
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
