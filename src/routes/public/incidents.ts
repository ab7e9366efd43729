import { Type } from 'typebox';
import { ApiError } from '../../errors.ts';
import { wholeNumber } from '../../lib/whole-number.ts';
import { documentedAs, HEADERS, NOT_MODIFIED, TAGS } from '../../schemas/openapi.ts';
import {
  ErrorSchema,
  INCIDENT_EXAMPLE,
  IncidentPaginationSchema,
  IncidentSchema,
  queryParameter,
  success,
} from '../../schemas/public.ts';
import type { PublicRoutes } from './response-cache.ts';

export const DEFAULT_PAGE_LIMIT = 50;
export const MAX_PAGE_LIMIT = 200;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * `page` and `limit` never cause a 400 (the contract lists none): anything but a whole number of
 * at least 1, written in decimal digits, falls back to the default.
 */
export function parsePositiveInteger(value: string | string[] | undefined, fallback: number): number {
  const n = wholeNumber(value);
  return n !== null && n >= 1 ? n : fallback;
}

export const incidentRoutes: PublicRoutes = async (app, { respond }) => {
  app.get(
    '/incidents',
    {
      schema: {
        operationId: 'listIncidents',
        tags: [TAGS.incidents.name],
        summary: 'List incidents, newest first',
        description:
          "Incidents of the key's account by creation time, newest first (then by id). Never a 400: a " +
          '`page` or `limit` that is not a whole number of at least 1 falls back to its default, a ' +
          '`limit` above 200 is reduced to 200, and a page past the last is empty with the true totals.',
        querystring: Type.Object({
          // Normalized, never refused: no minimum or maximum, which would make a validating client
          // or proxy refuse a request this API serves. `pagination` says what was in effect.
          page: queryParameter(
            Type.Integer({ default: 1 }),
            'Page number, from 1 (default 1). Normalized, never refused: anything but a whole number of at least 1 means 1; a page past the last is empty.',
          ),
          limit: queryParameter(
            Type.Integer({ default: DEFAULT_PAGE_LIMIT }),
            `Incidents per page, up to ${MAX_PAGE_LIMIT} (default ${DEFAULT_PAGE_LIMIT}). Normalized, never refused: above ${MAX_PAGE_LIMIT} means ${MAX_PAGE_LIMIT}, anything but a whole number of at least 1 means ${DEFAULT_PAGE_LIMIT}.`,
          ),
        }),
        response: {
          200: success(
            Type.Object({ data: Type.Array(IncidentSchema), pagination: IncidentPaginationSchema }),
          ),
        },
      },
      config: {
        openapi: {
          responses: {
            200: {
              description: 'One page of incidents and the pagination of the whole list.',
              headers: [HEADERS.etag],
              examples: {
                firstPage: {
                  error: false,
                  data: { data: [INCIDENT_EXAMPLE], pagination: { page: 1, limit: 50, total: 1, pages: 1 } },
                },
              },
            },
            304: NOT_MODIFIED,
          },
        },
      },
    },
    (request, reply) => {
      const page = parsePositiveInteger(request.query.page, 1);
      const limit = Math.min(parsePositiveInteger(request.query.limit, DEFAULT_PAGE_LIMIT), MAX_PAGE_LIMIT);
      return respond(request, reply, `${page}:${limit}`, async () => {
        // The total is read with the key, so the page needs no count of its own.
        const key = request.apiKey;
        const total = key.incident_count;
        const totals = { total, version: key.data_version, incarnation: key.account_created_at };
        const offset = (page - 1) * limit;
        return {
          error: false as const,
          data: {
            data: await app.services.incidents.listNewestFirst(key.account_id, totals, offset, limit),
            pagination: { page, limit, total, pages: Math.ceil(total / limit) },
          },
        };
      });
    },
  );

  app.get(
    '/incidents/:id',
    {
      schema: {
        operationId: 'getIncident',
        tags: [TAGS.incidents.name],
        summary: 'Get one incident',
        // Any text reaches the route, which answers 404 for what is not an incident of the account.
        params: Type.Object({
          id: documentedAs(Type.String({ description: 'Incident id' }), Type.String({ format: 'uuid' })),
        }),
        response: { 200: success(IncidentSchema), 404: ErrorSchema },
      },
      config: {
        openapi: {
          responses: {
            200: {
              description: 'The incident.',
              headers: [HEADERS.etag],
              examples: { incident: { error: false, data: INCIDENT_EXAMPLE } },
            },
            304: NOT_MODIFIED,
            404: {
              description:
                "No incident with this id in the key's account: also another account's id, or an id that is not a UUID.",
              examples: { notFound: { error: true, message: 'Incident not found' } },
            },
          },
        },
      },
    },
    (request, reply) => {
      const id = request.params.id.toLowerCase();
      if (!UUID.test(id)) throw ApiError.notFound('Incident not found');
      return respond(request, reply, id, async () => {
        const incident = await app.services.incidents.findById(request.apiKey.account_id, id);
        if (incident === undefined) throw ApiError.notFound('Incident not found');
        return { error: false as const, data: incident };
      });
    },
  );
};
