import { Type } from 'typebox';
import { ApiError } from '../../errors.ts';
import {
  ErrorSchema,
  IncidentPaginationSchema,
  IncidentSchema,
  publicErrorResponses,
  queryParameter,
  success,
} from '../../schemas/public.ts';
import { incidentService } from '../../services/incident-service.ts';
import type { PublicRoutes } from './response-cache.ts';

export const DEFAULT_PAGE_LIMIT = 50;
export const MAX_PAGE_LIMIT = 200;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * `page` and `limit` never cause a 400 (the contract lists none): anything but a whole number of
 * at least 1, written in decimal digits, falls back to the default.
 */
export function parsePositiveInteger(value: string | string[] | undefined, fallback: number): number {
  if (typeof value !== 'string' || !/^\d{1,20}$/.test(value)) return fallback;
  const n = Number(value);
  return n >= 1 ? Math.min(n, Number.MAX_SAFE_INTEGER) : fallback;
}

export const incidentRoutes: PublicRoutes = async (app, { respond }) => {
  app.get(
    '/incidents',
    {
      schema: {
        summary: 'List incidents, newest first',
        querystring: Type.Object({
          page: queryParameter('Page number, from 1 (default 1); anything else falls back to 1'),
          limit: queryParameter(
            'Incidents per page, 1 to 200 (default 50); above 200 means 200, anything else 50',
          ),
        }),
        response: {
          200: success(
            Type.Object({ data: Type.Array(IncidentSchema), pagination: IncidentPaginationSchema }),
          ),
          ...publicErrorResponses,
        },
      },
    },
    (request, reply) => {
      const page = parsePositiveInteger(request.query.page, 1);
      const limit = Math.min(parsePositiveInteger(request.query.limit, DEFAULT_PAGE_LIMIT), MAX_PAGE_LIMIT);
      return respond(request, reply, `${page}:${limit}`, async () => {
        // The total is read with the key, so the page needs no count of its own.
        const { account_id: accountId, incident_count: total, data_version: version } = request.apiKey;
        const offset = (page - 1) * limit;
        return {
          error: false as const,
          data: {
            data: await incidentService.listNewestFirst(app.db, accountId, { total, version }, offset, limit),
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
        summary: 'Get one incident',
        params: Type.Object({ id: Type.String() }),
        response: { 200: success(IncidentSchema), 404: ErrorSchema, ...publicErrorResponses },
      },
    },
    (request, reply) => {
      const id = request.params.id.toLowerCase();
      if (!UUID.test(id)) throw ApiError.notFound('Incident not found');
      return respond(request, reply, id, async () => {
        const incident = await incidentService.findById(app.db, request.apiKey.account_id, id);
        if (incident === undefined) throw ApiError.notFound('Incident not found');
        return { error: false as const, data: incident };
      });
    },
  );
};
