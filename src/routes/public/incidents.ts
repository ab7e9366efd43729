import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { type IncidentRow, incidentRepository } from '../../db/repositories/incidents.ts';
import { ApiError } from '../../errors.ts';
import {
  ErrorSchema,
  type Incident,
  IncidentPaginationSchema,
  IncidentSchema,
  publicErrorResponses,
  QueryParameter,
  success,
} from '../../schemas/public.ts';
import type { Respond } from './response-cache.ts';

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

export function toIncident(row: IncidentRow): Incident {
  const { severity_likelihood: likelihood, severity_impact: impact } = row;
  return {
    id: row.id,
    incident_number: row.incident_number,
    description: row.description,
    status: row.status,
    severity_score: likelihood === null || impact === null ? null : likelihood * impact,
    severity_likelihood: likelihood,
    severity_impact: impact,
    location: row.location,
    incident_date: row.incident_date,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export const incidentRoutes: FastifyPluginAsyncTypebox<{ respond: Respond }> = async (app, { respond }) => {
  app.get(
    '/incidents',
    {
      schema: {
        summary: 'List incidents, newest first',
        querystring: Type.Object({ page: QueryParameter, limit: QueryParameter }),
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
        const { account_id: accountId, incident_count: total } = request.apiKey;
        // Positions run from 1 (oldest) to total (newest); page 1 holds the highest positions.
        const highest = total - (page - 1) * limit;
        const rows =
          highest >= 1
            ? await incidentRepository.listByPositionRange(
                app.db,
                accountId,
                Math.max(highest - limit + 1, 1),
                highest,
              )
            : [];
        return {
          error: false as const,
          data: {
            data: rows.map(toIncident),
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
        const row = await incidentRepository.findById(app.db, request.apiKey.account_id, id);
        if (row === undefined) throw ApiError.notFound('Incident not found');
        return { error: false as const, data: toIncident(row) };
      });
    },
  );
};
