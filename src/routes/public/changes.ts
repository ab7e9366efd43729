import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import { ApiError } from '../../errors.ts';
import { TAGS } from '../../schemas/openapi.ts';
import { utf8Body } from '../../lib/utf8.ts';
import {
  ChangesPageSchema,
  CodedErrorSchema,
  INCIDENT_EXAMPLE,
  queryParameter,
  success,
} from '../../schemas/public.ts';
import { LATEST_CURSOR, type RenderedChangesPage } from '../../services/change-feed-service.ts';
import { parsePositiveInteger } from './incidents.ts';
import type { PublicRoutes } from './response-cache.ts';

export const DEFAULT_CHANGES_LIMIT = 100;
export const MAX_CHANGES_LIMIT = 1000;

/**
 * Sends a 200: what `JSON.stringify({ error: false, data: page })` writes, byte for byte, built
 * one change at a time (`utf8Body`): a page of 1,000 incidents is about 500 KB, and as one string
 * it cost more in fresh memory and copies than the rest of the request (docs/performance.md). Each
 * change comes rendered (`ChangeFeedService.page`).
 */
function sendPage(reply: FastifyReply, { data, next_cursor, has_more }: RenderedChangesPage): FastifyReply {
  const pieces: (string | Uint8Array)[] = ['{"error":false,"data":{"data":['];
  for (const [index, change] of data.entries()) {
    if (index > 0) pieces.push(',');
    pieces.push(change);
  }
  pieces.push(`],"next_cursor":${JSON.stringify(next_cursor)},"has_more":${JSON.stringify(has_more)}}}`);
  return reply.header('content-type', 'application/json; charset=utf-8').send(utf8Body(reply.raw, pieces));
}

/**
 * `GET /changes`, the changes feed (docs/design.md, "Changes feed").
 *
 * It answers without the response cache (`respond`). A page would be cacheable once its cursor
 * is checked (it follows from the account, its data version, the cursor and the limit), but:
 * - a catch-up walk asks for each page once, so caching its pages (up to about 500 KB each at
 *   limit=1000) only pushes the list pages, which are asked for again and again, out of the
 *   shared cache: a walk over a million incidents would pass 500 MB through a 32 MB cache;
 * - the one page that is asked for again, the empty page at the head, would hand out the cursor
 *   it was first issued with, whose `issuedAt` ages until CHANGES_RETENTION_DAYS expires it while
 *   the client keeps polling (an ETag and a 304 would do the same), and it costs a snapshot read
 *   of one account row and five empty index ranges, no more than a list page's read.
 */
export const changeRoutes: PublicRoutes = async (app) => {
  app.get(
    '/changes',
    {
      // The schemas below describe the responses (the OpenAPI document); `sendPage` writes a 200
      // and JSON.stringify the errors. A change's shape depends on its `type`, a union that
      // Fastify's serializer resolves by validating every change against each variant in turn,
      // formats included: about as slow as the rest of a page, and a stored value its format
      // refuses (an email like "a b@c") would turn the page into a 500. The objects come from the
      // list endpoints' renderers and column lists, so they hold those fields only, in the lists'
      // order.
      serializerCompiler: () => (data) => JSON.stringify(data),
      schema: {
        operationId: 'listChanges',
        tags: [TAGS.changes.name],
        summary: 'Every record changed after a cursor, oldest change first, each once in its latest state',
        description:
          'A compacted log of the public data: incidents, users, departments and locations. Without a ' +
          '`cursor` it starts from the beginning, so following `next_cursor` until `has_more` is false ' +
          'is a full sync; afterwards the same cursor returns only what changed since. A record that ' +
          'left the public view (deleted, deactivated, vendor support) is a `delete` with a null ' +
          '`object`; one that came back is an `upsert`. `cursor=latest` returns no changes and a cursor ' +
          'at the current head. Cursors are opaque and bound to the account: a garbled one is 400 ' +
          '`INVALID_CURSOR`; one the feed can no longer continue from (older than the retention of ' +
          'deletions, CHANGES_RETENTION_DAYS, default 400 days) is 410 `CURSOR_EXPIRED`, and the ' +
          'client syncs again from no cursor.',
        querystring: Type.Object({
          cursor: queryParameter(
            Type.String(),
            `The next_cursor of the previous page; none to start from the beginning (a full sync), "${LATEST_CURSOR}" for the current head`,
          ),
          // Normalized like the incident list's, so documented without bounds as well.
          limit: queryParameter(
            Type.Integer({ default: DEFAULT_CHANGES_LIMIT }),
            `Changes per page, up to ${MAX_CHANGES_LIMIT} (default ${DEFAULT_CHANGES_LIMIT}). Normalized, never refused: above ${MAX_CHANGES_LIMIT} means ${MAX_CHANGES_LIMIT}, anything but a whole number of at least 1 means ${DEFAULT_CHANGES_LIMIT}.`,
          ),
        }),
        response: {
          200: success(ChangesPageSchema),
          400: CodedErrorSchema,
          410: CodedErrorSchema,
        },
      },
      config: {
        openapi: {
          responses: {
            200: {
              description: 'One page of changes and the cursor to continue from. Not cached: no ETag.',
              examples: {
                page: {
                  error: false,
                  data: {
                    data: [
                      {
                        seq: 1042,
                        type: 'incident',
                        op: 'upsert',
                        id: INCIDENT_EXAMPLE.id,
                        object: INCIDENT_EXAMPLE,
                        changed_at: '2025-11-04T14:05:01.000Z',
                      },
                      {
                        seq: 1043,
                        type: 'incident',
                        op: 'delete',
                        id: '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d',
                        object: null,
                        changed_at: '2025-11-04T14:05:01.000Z',
                      },
                    ],
                    next_cursor: 'AQAAAAAEEwAAAAAEEmkJ3wCd0k5n1Xq3aVqT0yY7fQ',
                    has_more: false,
                  },
                },
              },
            },
            400: {
              description: 'The cursor is not one this API issued to this account (`INVALID_CURSOR`).',
              examples: { invalidCursor: ApiError.invalidCursor().body },
            },
            410: {
              description: 'The feed can no longer continue from this cursor (`CURSOR_EXPIRED`): sync again.',
              examples: { cursorExpired: ApiError.cursorExpired(400).body },
            },
          },
        },
      },
    },
    async (request, reply) => {
      const { cursor } = request.query;
      // A repeated `cursor` names no one position.
      if (Array.isArray(cursor)) throw ApiError.invalidCursor();
      const limit = Math.min(
        parsePositiveInteger(request.query.limit, DEFAULT_CHANGES_LIMIT),
        MAX_CHANGES_LIMIT,
      );
      const page = await app.services.changeFeed.page(request.apiKey.account_id, {
        // `?cursor=` (empty) is no cursor, as a client building its first URL sends it.
        cursor: cursor === '' ? undefined : cursor,
        limit,
        retentionDays: app.config.changesRetentionDays,
      });
      return sendPage(reply, page);
    },
  );
};
