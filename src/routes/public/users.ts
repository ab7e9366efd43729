import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { userRepository } from '../../db/repositories/users.ts';
import { publicErrorResponses, success, UserSchema } from '../../schemas/public.ts';

export async function userRoutes(app: FastifyInstance): Promise<void> {
  app.get(
    '/users',
    {
      schema: {
        summary: 'List active users (vendor support accounts excluded), by name',
        response: { 200: success(Type.Array(UserSchema)), ...publicErrorResponses },
      },
    },
    async (request) => ({
      error: false as const,
      data: await userRepository.listVisible(app.db, request.apiKey.account_id),
    }),
  );
}
