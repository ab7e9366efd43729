import type { FastifyRequest } from 'fastify';

const NAME = 'authorization';

/**
 * The request's one Authorization header: `undefined` when it has none, and also when it has more
 * than one. Node keeps the first of repeated Authorization headers and drops the others
 * (`request.headers`), so a request with two would be judged by one of them while a proxy or a log
 * in front of the service may go by the other. Two credentials are no credential: the public API
 * answers 401 `API_KEY_REQUIRED`, the wider API its 401 for a missing token.
 */
export function soleAuthorization(request: FastifyRequest): string | undefined {
  const value = request.headers.authorization;
  if (value === undefined) return undefined;
  // Names and values alternate; a name is compared only when its length could match.
  const raw = request.raw.rawHeaders;
  let seen = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i];
    if (name?.length === NAME.length && name.toLowerCase() === NAME && ++seen > 1) return undefined;
  }
  return value;
}
