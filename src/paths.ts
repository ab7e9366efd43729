import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The folder holding package.json. Files shipped beside the code (admin assets) are found from
 * here, so the same lookup works from the TypeScript sources and from the bundle in dist/.
 */
function findProjectRoot(start: string): string {
  let dir = start;
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`no package.json above ${start}`);
    dir = parent;
  }
  return dir;
}

export const PROJECT_ROOT = findProjectRoot(dirname(fileURLToPath(import.meta.url)));

// The service's own URL paths, one definition each: the code that mounts a surface and the code
// that links to it, redirects to it or scopes a cookie to it read the same constant.

/** The OAuth 2 authorization server; its issuer is `BASE_URL` + this (DESIGN: OAuth 2). */
export const OAUTH_PATH = '/integration/v1/oauth2';

/** The public API (API keys) and the wider API (OAuth 2 access tokens). */
export const PUBLIC_API_PATH = '/api/v1/public';
export const WIDER_API_PATH = '/api/v1';

/** Where the admin panel is mounted; its session cookie is scoped to it. */
export const ADMIN_PATH = '/admin';
export const SIGN_IN_PATH = `${ADMIN_PATH}/sign-in`;
export const SIGN_OUT_PATH = `${ADMIN_PATH}/sign-out`;
export const ADMIN_ASSETS_PATH = `${ADMIN_PATH}/assets`;
export const INTEGRATIONS_PATH = `${ADMIN_PATH}/settings/integrations`;
export const KEYS_PATH = `${INTEGRATIONS_PATH}/api-keys`;
export const OAUTH_CLIENTS_PATH = `${INTEGRATIONS_PATH}/oauth-clients`;
export const WEBHOOKS_PATH = `${INTEGRATIONS_PATH}/webhooks`;
export const AUDIT_PATH = `${INTEGRATIONS_PATH}/audit`;

/** The panel's page of one key, and of one webhook endpoint: linked from the panel and from mails. */
export function keyPath(keyId: string): string {
  return `${KEYS_PATH}/${encodeURIComponent(keyId)}`;
}

export function endpointPath(endpointId: string): string {
  return `${WEBHOOKS_PATH}/${encodeURIComponent(endpointId)}`;
}

/** The `WWW-Authenticate` challenge of every surface that takes a bearer credential. */
export const BEARER_REALM = 'Bearer realm="safety-api"';
