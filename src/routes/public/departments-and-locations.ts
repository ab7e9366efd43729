import { Type } from 'typebox';
import { NamedResourceSchema, publicErrorResponses, success } from '../../schemas/public.ts';
import { directoryService, NAMED_RESOURCE_TABLES } from '../../services/directory-service.ts';
import type { PublicRoutes } from './response-cache.ts';

/** `/departments` and `/locations`: active records of the account, by name. */
export const departmentAndLocationRoutes: PublicRoutes = async (app, { respond }) => {
  for (const table of NAMED_RESOURCE_TABLES) {
    app.get(
      `/${table}`,
      {
        schema: {
          summary: `List active ${table}, by name`,
          response: { 200: success(Type.Array(NamedResourceSchema)), ...publicErrorResponses },
        },
      },
      (request, reply) =>
        respond(request, reply, '', async () => ({
          error: false as const,
          data: await directoryService.listNamedResources(app.db, table, request.apiKey.account_id),
        })),
    );
  }
};
