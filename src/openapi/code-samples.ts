import { OAUTH_PATH, PUBLIC_API_PATH, WIDER_API_PATH } from '../paths.ts';
import { INCIDENT_EXAMPLE } from '../schemas/public.ts';
import { KEY_HEADER, sdkClient } from './guides.ts';

/**
 * The request samples of every operation, the document's `x-codeSamples`: curl and the TypeScript
 * SDK for each (packages/sdk: `createClient` for the public API with a key, the wider API with an
 * access token and the probes; `createOAuthClient` for the OAuth 2 endpoints). They run as they
 * are against `baseUrl`, reading credentials from environment variables;
 * test/openapi/code-samples.test.ts runs every one, and checks that each SDK sample calls the
 * operation's method.
 */

export interface CodeSamples {
  curl: string;
  /** A whole TypeScript module that uses `@safety-incident/sdk`. */
  sdk: string;
}

/** Scalar keys a sample by its language (`custom/<lang>`), here and in `x-scalar-sdk-installation`. */
const LANGUAGES = { curl: 'curl', sdk: 'TypeScript' } as const;

const TOKEN_HEADER = '-H "Authorization: Bearer $ACCESS_TOKEN"';
/** A confidential client's credentials, in the `Authorization: Basic` header (client_secret_basic). */
const CLIENT = '-u "$CLIENT_ID:$CLIENT_SECRET"';

/** An SDK sample: the imports, the line that makes its client, then what it does. */
const module = (imports: string[], client: string, lines: string) =>
  [...imports, '', client, lines.trim()].join('\n');

/** With the client of the public API (and the probes): an API key. */
const sdk = (baseUrl: string, lines: string, imports: string[] = []) =>
  module([...imports, "import { createClient } from '@safety-incident/sdk';"], sdkClient(baseUrl), lines);

/** With the client of the wider API: an OAuth 2 access token. */
const widerSdk = (baseUrl: string, lines: string) =>
  module(
    ["import { createClient } from '@safety-incident/sdk';"],
    `const client = createClient({\n  baseUrl: '${baseUrl}',\n  accessToken: process.env.ACCESS_TOKEN ?? '',\n});`,
    lines,
  );

/** With the OAuth 2 client of a registered partner app. */
const oauthSdk = (baseUrl: string, lines: string) =>
  module(
    ["import { createOAuthClient } from '@safety-incident/sdk';"],
    `const oauth = createOAuthClient({\n  baseUrl: '${baseUrl}',\n  clientId: process.env.CLIENT_ID ?? '',\n  clientSecret: process.env.CLIENT_SECRET,\n});`,
    lines,
  );

const capitalized = (word: string) => `${word.charAt(0).toUpperCase()}${word.slice(1)}`;

export function codeSamples(baseUrl: string): Record<string, CodeSamples> {
  const api = `${baseUrl}${PUBLIC_API_PATH}`;
  const oauth = `${baseUrl}${OAUTH_PATH}`;
  const samples: Record<string, CodeSamples> = {
    listIncidents: {
      curl: `curl -s "${api}/incidents?page=1&limit=200" ${KEY_HEADER}`,
      sdk: sdk(
        baseUrl,
        `
const { data, rateLimit } = await client.listIncidents({ page: 1, limit: 200 });
console.log(\`\${data.pagination.total} incidents, \${rateLimit?.remaining} requests left this hour\`);
for (const incident of data.data) console.log(incident.incident_number, incident.status);
// Every page, 200 incidents a request: for await (const incident of client.incidents()) …`,
      ),
    },
    getIncident: {
      curl: `curl -s "${api}/incidents/${INCIDENT_EXAMPLE.id}" ${KEY_HEADER}`,
      sdk: sdk(
        baseUrl,
        `
const { data: incident } = await client.getIncident('${INCIDENT_EXAMPLE.id}');
console.log(incident.incident_number, incident.status, incident.severity_score);`,
      ),
    },
    listUsers: {
      curl: `curl -s "${api}/users" ${KEY_HEADER}`,
      sdk: sdk(
        baseUrl,
        `
const { data: users } = await client.listUsers();
for (const user of users) console.log(user.name, user.email, user.role);`,
      ),
    },
    listChanges: {
      curl: `curl -s "${api}/changes?limit=1000" ${KEY_HEADER}`,
      sdk: sdk(
        baseUrl,
        `
const { data: page } = await client.listChanges({ limit: 1000 }); // from the start; cursor: to go on
for (const change of page.data) console.log(change.seq, change.op, change.type, change.id);
console.log('next_cursor:', page.next_cursor, 'has_more:', page.has_more);
// client.sync() exports, then follows the feed page after page.`,
      ),
    },
    checkLiveness: {
      curl: `curl -s "${baseUrl}/healthz"`,
      sdk: sdk(
        baseUrl,
        `
const { data } = await client.checkLiveness(); // no credential sent, nothing counted
console.log(data.status);`,
      ),
    },
    checkReadiness: {
      curl: `curl -s "${baseUrl}/readyz"`,
      sdk: sdk(
        baseUrl,
        `
const { data: readiness } = await client.checkReadiness(); // the report, on a 503 too
console.log(readiness.status, 'database:', readiness.database, 'redis:', readiness.redis);`,
      ),
    },
    getOpenIdConfiguration: {
      curl: `curl -s "${oauth}/.well-known/openid-configuration"`,
      sdk: oauthSdk(
        baseUrl,
        `
const configuration = await oauth.getOpenIdConfiguration();
console.log(configuration.issuer, configuration.scopes_supported.join(' '));`,
      ),
    },
    getJwks: {
      curl: `curl -s "${oauth}/jwks"`,
      sdk: oauthSdk(
        baseUrl,
        `
const { keys } = await oauth.getJwks();
for (const key of keys) console.log(key.kid, key.alg);`,
      ),
    },
    authorize: {
      // A URL for the person's browser: curl shows where it is sent first, the sign-in page.
      curl: `curl -s -G "${oauth}/authorize" -o /dev/null -w '%{http_code} %{redirect_url}\\n' \\
  -d response_type=code -d client_id="$CLIENT_ID" --data-urlencode redirect_uri="$REDIRECT_URI" \\
  --data-urlencode scope="openid incidents:read" -d code_challenge="$CODE_CHALLENGE" -d code_challenge_method=S256`,
      sdk: oauthSdk(
        baseUrl,
        `
// A new PKCE pair (S256) and state; no request is made.
const { url, codeVerifier, state } = oauth.authorizationUrl({
  redirectUri: process.env.REDIRECT_URI ?? '',
  scope: 'openid incidents:read',
});
console.log('send the browser to', url);
// At the redirect URI: check its state, then oauth.exchangeCode({ code, codeVerifier, redirectUri }).
console.log('keep for the callback:', { codeVerifier, state });`,
      ),
    },
    pushAuthorizationRequest: {
      curl: `curl -s "${oauth}/request" ${CLIENT} -d client_id="$CLIENT_ID" \\
  -d response_type=code --data-urlencode redirect_uri="$REDIRECT_URI" \\
  --data-urlencode scope="openid incidents:read" -d code_challenge="$CODE_CHALLENGE" -d code_challenge_method=S256`,
      sdk: oauthSdk(
        baseUrl,
        `
const { url, codeVerifier, state, expiresIn } = await oauth.pushAuthorizationRequest({
  redirectUri: process.env.REDIRECT_URI ?? '',
  scope: 'openid incidents:read',
});
console.log(\`send the browser to \${url} within \${expiresIn} s\`);
console.log('keep for the callback:', { codeVerifier, state });`,
      ),
    },
    createToken: {
      curl: `curl -s "${oauth}/token" ${CLIENT} \\
  -d grant_type=client_credentials --data-urlencode scope="incidents:read users:read"
# For a person's approval: -d grant_type=authorization_code -d code="$CODE" -d code_verifier="$CODE_VERIFIER" --data-urlencode redirect_uri="$REDIRECT_URI"`,
      sdk: oauthSdk(
        baseUrl,
        `
const tokens = await oauth.clientCredentialsToken({ scope: 'incidents:read users:read' });
console.log(tokens.token_type, 'token for', tokens.scope, 'expires in', tokens.expires_in, 's');
// Its access_token is createClient's accessToken. For a person's approval, at the callback:
// await oauth.exchangeCode({ code, codeVerifier, redirectUri })`,
      ),
    },
    refreshToken: {
      curl: `curl -s "${oauth}/token/refresh" ${CLIENT} -d refresh_token="$REFRESH_TOKEN"`,
      sdk: oauthSdk(
        baseUrl,
        `
const tokens = await oauth.refreshToken(process.env.REFRESH_TOKEN ?? '');
// The refresh token rotates: store tokens.refresh_token, the one sent is spent.
console.log('new tokens, the access token expiring in', tokens.expires_in, 's');`,
      ),
    },
    // No body: the status says it worked.
    revokeToken: {
      curl: `curl -s "${oauth}/revoke" ${CLIENT} -d token="$REFRESH_TOKEN" -w '%{http_code}\\n'`,
      sdk: oauthSdk(
        baseUrl,
        `
await oauth.revokeToken(process.env.REFRESH_TOKEN ?? '', { tokenTypeHint: 'refresh_token' });
console.log('revoked: the grant and its access tokens end');`,
      ),
    },
    getUserInfo: {
      curl: `curl -s "${oauth}/userinfo" ${TOKEN_HEADER}`,
      sdk: oauthSdk(
        baseUrl,
        `
const claims = await oauth.getUserInfo(process.env.ACCESS_TOKEN ?? '');
console.log(claims.sub, claims.name, claims.email, claims.role);`,
      ),
    },
    getUserInfoByPost: {
      curl: `curl -s "${oauth}/userinfo" -d access_token="$ACCESS_TOKEN"`,
      sdk: oauthSdk(
        baseUrl,
        `
// The SDK asks with GET, the token in the header; the POST form is for a client that cannot set one.
const claims = await oauth.getUserInfo(process.env.ACCESS_TOKEN ?? '');
console.log(claims.sub, claims.name, claims.email, claims.role);`,
      ),
    },
    endSession: {
      // A URL for the person's browser: the page it answers signs them out.
      curl: `curl -s "${oauth}/session/end?client_id=$CLIENT_ID" -o /dev/null -w '%{http_code}\\n'`,
      sdk: oauthSdk(
        baseUrl,
        `
// For the person's browser; no request is made. Tokens already issued stay valid: revoke them.
console.log('send the browser to', oauth.endSessionUrl());`,
      ),
    },
  };
  for (const resource of ['departments', 'locations']) {
    const record = resource.slice(0, -1);
    samples[`list${capitalized(resource)}`] = {
      curl: `curl -s "${api}/${resource}" ${KEY_HEADER}`,
      sdk: sdk(
        baseUrl,
        `
const { data } = await client.list${capitalized(resource)}();
for (const ${record} of data) console.log(${record}.name);`,
      ),
    };
  }
  for (const resource of ['incidents', 'users', 'departments', 'locations']) {
    const record = resource.slice(0, -1);
    const name = capitalized(resource);
    samples[`export${name}`] = {
      // The headers (`X-Changes-Cursor` among them) on standard output, the rows in the file.
      curl: `curl -s --compressed "${api}/exports/${resource}.ndjson" ${KEY_HEADER} -D - -o ${resource}.ndjson`,
      sdk: sdk(
        baseUrl,
        `
const ${resource} = await client.export${name}();
for await (const ${record} of ${resource}) console.log(${record}.id);
console.log('continue with listChanges from', ${resource}.cursor); // X-Changes-Cursor`,
      ),
    };
    samples[`export${name}Csv`] = {
      curl: `curl -s --compressed "${api}/exports/${resource}.csv" ${KEY_HEADER} -D - -o ${resource}.csv`,
      sdk: sdk(
        baseUrl,
        `
const csv = await client.export${name}({ format: 'csv' });
await writeFile('${resource}.csv', csv.body); // RFC 4180, with a header row
console.log('continue with listChanges from', csv.cursor); // X-Changes-Cursor`,
        ["import { writeFile } from 'node:fs/promises';"],
      ),
    };
    samples[`list${name}Paged`] = {
      curl: `curl -s "${baseUrl}${WIDER_API_PATH}/${resource}?_start=0&_limit=100" ${TOKEN_HEADER}`,
      sdk: widerSdk(
        baseUrl,
        `
const { data: page } = await client.list${name}Paged({ start: 0, limit: 100 });
for (const ${record} of page.response) console.log(${record}.id, ${record === 'incident' ? 'incident.incident_number' : `${record}.name`});
console.log(\`page \${page.pagination.currentPage} of \${page.pagination.totalPages}\`);
// Every page, 100 a request: for await (const ${record} of client.${resource}Paged()) …`,
      ),
    };
  }
  return samples;
}

/** An operation's `x-codeSamples`: curl first, the sample Scalar shows until the reader picks another. */
export function xCodeSamples({ curl, sdk }: CodeSamples): { lang: string; label: string; source: string }[] {
  return [
    { lang: LANGUAGES.curl, label: 'curl', source: curl },
    { lang: LANGUAGES.sdk, label: 'TypeScript SDK', source: sdk },
  ];
}

/**
 * `info.x-scalar-sdk-installation`: Scalar's "Client Libraries" box, one tab per sample language.
 * Picking a tab there picks that language's samples on every operation.
 */
export function sdkInstallation(): { lang: string; description: string; source: string }[] {
  return [
    {
      lang: LANGUAGES.curl,
      description:
        'Every operation in curl, as it runs: the public API reads the key from `SAFETY_API_KEY`, the wider API an OAuth 2 access token from `ACCESS_TOKEN`.',
      source: 'export SAFETY_API_KEY=svc_…   # an API key of the account',
    },
    {
      lang: LANGUAGES.sdk,
      description:
        "`@safety-incident/sdk`, the official TypeScript client: the public API (typed calls, paging, retries, ETags, exports, `sync()`), the wider API with an access token, the OAuth 2 flows (`createOAuthClient`), the probes and `verifyWebhook()`, for Node.js 20 or later. It lives in the service's repository (packages/sdk), not on the npm registry: pack it there, then install the tarball in your project.",
      source:
        'npm pack --workspace @safety-incident/sdk       # in the repository\nnpm install /path/to/safety-incident-sdk-*.tgz  # in your project',
    },
  ];
}
