import { type Static, Type } from 'typebox';
import { ApiError } from '../../errors.ts';
import { wholeNumber } from '../../lib/whole-number.ts';
import { component } from '../../schemas/openapi.ts';
import { queryParameter } from '../../schemas/public.ts';

/** The wider API's paging convention: `_start` (offset, default 0) and `_limit` (default 20, at most 100). */

export const DEFAULT_LIMIT = 20;
export const MAX_LIMIT = 100;

export interface PageRequest {
  start: number;
  limit: number;
}

/** Typed as the parser hands them over; `parsePageRequest`, not validation, refuses a bad one. */
export const PageQuerySchema = Type.Object({
  _start: queryParameter(
    Type.Integer({ minimum: 0, default: 0 }),
    'Offset of the first record, a whole number from 0 (default 0); the next page starts at `start` + `_limit`',
  ),
  // No maximum: a larger value is served, reduced to MAX_LIMIT (`perPage` says so). Below 1 is a 400.
  _limit: queryParameter(
    Type.Integer({ minimum: 1, default: DEFAULT_LIMIT }),
    `Records per page, a whole number from 1 (default ${DEFAULT_LIMIT}). Normalized: above ${MAX_LIMIT} means ${MAX_LIMIT}.`,
  ),
});
type PageQuery = Static<typeof PageQuerySchema>;

export const PaginationSchema = component(
  'Pagination',
  Type.Object({
    totalRecords: Type.Integer({ minimum: 0 }),
    perPage: Type.Integer({ minimum: 1, maximum: MAX_LIMIT }),
    totalPages: Type.Integer({ minimum: 0 }),
    start: Type.Integer({ minimum: 0 }),
    currentPage: Type.Integer({
      minimum: 1,
      description: '1-based; more pages exist while it is below totalPages',
    }),
  }),
);
export type Pagination = Static<typeof PaginationSchema>;

function badParameter(message: string): ApiError {
  return new ApiError(400, null, message);
}

/**
 * Unlike the public incident list (which never answers 400), a malformed `_start` or `_limit` is
 * refused with a message naming it. A `_limit` above the maximum is reduced to it, as the design says.
 */
export function parsePageRequest(query: PageQuery): PageRequest {
  const start = wholeNumber(query._start ?? '0');
  const limit = wholeNumber(query._limit ?? String(DEFAULT_LIMIT));
  if (start === null) {
    throw badParameter(`_start must be a whole number of 0 or more (got ${JSON.stringify(query._start)})`);
  }
  if (limit === null || limit < 1) {
    throw badParameter(
      `_limit must be a whole number from 1 to ${MAX_LIMIT} (got ${JSON.stringify(query._limit)})`,
    );
  }
  return { start, limit: Math.min(limit, MAX_LIMIT) };
}

export function pagination(page: PageRequest, totalRecords: number): Pagination {
  return {
    totalRecords,
    perPage: page.limit,
    totalPages: Math.ceil(totalRecords / page.limit),
    start: page.start,
    currentPage: Math.floor(page.start / page.limit) + 1,
  };
}
