import { Type } from 'typebox';
import { HEADERS, NOT_MODIFIED, TAGS } from '../../schemas/openapi.ts';
import { success, USER_EXAMPLE, UserSchema } from '../../schemas/public.ts';
import { directoryService } from '../../services/directory-service.ts';
import type { PublicRoutes } from './response-cache.ts';

export const userRoutes: PublicRoutes = async (app, { respond }) => {
  app.get(
    '/users',
    {
      schema: {
        operationId: 'listUsers',
        tags: [TAGS.directory.name],
        summary: 'List active users, by name',
        description:
          'Every active user of the account, by name (case-insensitive, then id), unpaginated. Vendor support accounts are never shown.',
        response: { 200: success(Type.Array(UserSchema)) },
      },
      config: {
        openapi: {
          responses: {
            200: {
              description: 'The active users.',
              headers: [HEADERS.etag],
              examples: { users: { error: false, data: [USER_EXAMPLE] } },
            },
            304: NOT_MODIFIED,
          },
        },
      },
    },
    (request, reply) =>
      respond(request, reply, '', async () => ({
        error: false as const,
        data: await directoryService.listUsers(app.db, request.apiKey.account_id),
      })),
  );
};
