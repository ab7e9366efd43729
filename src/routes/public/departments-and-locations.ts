import { Type } from 'typebox';
import { HEADERS, NOT_MODIFIED, TAGS } from '../../schemas/openapi.ts';
import { NAMED_RESOURCES, success } from '../../schemas/public.ts';
import { directoryService, NAMED_RESOURCE_TABLES } from '../../services/directory-service.ts';
import type { PublicRoutes } from './response-cache.ts';

const OPERATION_IDS = { departments: 'listDepartments', locations: 'listLocations' };

/** `/departments` and `/locations`: active records of the account, by name. */
export const departmentAndLocationRoutes: PublicRoutes = async (app, { respond }) => {
  for (const table of NAMED_RESOURCE_TABLES) {
    const { schema, example } = NAMED_RESOURCES[table];
    app.get(
      `/${table}`,
      {
        schema: {
          operationId: OPERATION_IDS[table],
          tags: [TAGS.directory.name],
          summary: `List active ${table}, by name`,
          description: `Every active ${table.slice(0, -1)} of the account, by name (case-insensitive, then id), unpaginated.`,
          response: { 200: success(Type.Array(schema)) },
        },
        config: {
          openapi: {
            responses: {
              200: {
                description: `The active ${table}.`,
                headers: [HEADERS.etag],
                examples: { [table]: { error: false, data: [example] } },
              },
              304: NOT_MODIFIED,
            },
          },
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
