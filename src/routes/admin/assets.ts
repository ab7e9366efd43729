import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { PROJECT_ROOT } from '../../paths.ts';

// A fixed list read once at start: no path from the request ever reaches the file system.
const ASSET_TYPES: Record<string, string> = {
  'admin.css': 'text/css; charset=utf-8',
  'admin.js': 'text/javascript; charset=utf-8',
};

export async function adminAssetRoutes(app: FastifyInstance): Promise<void> {
  const dir = join(PROJECT_ROOT, 'src/admin/assets');
  const assets = new Map(
    Object.entries(ASSET_TYPES).map(([name, type]) => [name, { type, body: readFileSync(join(dir, name)) }]),
  );

  app.get<{ Params: { file: string } }>('/assets/:file', async (request, reply) => {
    const asset = assets.get(request.params.file);
    if (asset === undefined) return reply.callNotFound();
    return reply.header('cache-control', 'public, max-age=300').type(asset.type).send(asset.body);
  });
}
