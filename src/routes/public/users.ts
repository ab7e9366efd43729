import { Type } from 'typebox';
import { publicErrorResponses, success, UserSchema } from '../../schemas/public.ts';
import { directoryService } from '../../services/directory-service.ts';
import type { PublicRoutes } from './response-cache.ts';

export const userRoutes: PublicRoutes = async (app, { respond }) => {
  app.get(
    '/users',
    {
      schema: {
        summary: 'List active users (vendor support accounts excluded), by name',
        response: { 200: success(Type.Array(UserSchema)), ...publicErrorResponses },
      },
    },
    (request, reply) =>
      respond(request, reply, '', async () => ({
        error: false as const,
        data: await directoryService.listUsers(app.db, request.apiKey.account_id),
      })),
  );
};
