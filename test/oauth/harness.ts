import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import type { Kysely } from 'kysely';
import * as oidc from 'openid-client';
import { cheapPasswordHash } from '../auth/password-fixtures.ts';
import type { StoreName } from '../../src/db/database.ts';
import type { Database } from '../../src/db/schema.ts';
import { oauthClientService } from '../../src/services/oauth-client-service.ts';
import { OAUTH_PATH } from '../../src/paths.ts';
import { createTestContext, type TestContext } from '../helpers.ts';

/**
 * Support for OAuth tests: the real app listening on a local port (the issuer must be a URL
 * clients can reach), seeded users and clients, and a minimal browser that drives the sign-in
 * and consent pages with fetch, carrying cookies by hand.
 */

export const REDIRECT_URI = 'http://127.0.0.1:9/callback';
export const PASSWORD = 'correct horse battery staple';

export interface OauthServer {
  ctx: TestContext;
  baseUrl: string;
  issuer: URL;
  close(): Promise<void>;
}

/** A port of 127.0.0.1 that nothing listens on now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

/** The app listening on a free port of 127.0.0.1, with BASE_URL set to that address. */
export async function startOauthServer(
  store: StoreName,
  env: Record<string, string> = {},
): Promise<OauthServer> {
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const ctx = await createTestContext(store, { ...env, BASE_URL: baseUrl });
  await ctx.app.listen({ port, host: '127.0.0.1' });
  return { ctx, baseUrl, issuer: new URL(`${baseUrl}${OAUTH_PATH}`), close: () => ctx.close() };
}

export async function seedUser(
  db: Kysely<Database>,
  accountId: string,
  overrides: Partial<{
    name: string;
    email: string;
    role: string;
    department: string | null;
    active: number;
    vendor_support: number;
  }> = {},
): Promise<{ id: string; email: string }> {
  const id = randomUUID();
  const email = overrides.email ?? `user-${id.slice(0, 8)}@example.com`;
  await db
    .insertInto('users')
    .values({
      id,
      account_id: accountId,
      name: overrides.name ?? `User ${id.slice(0, 8)}`,
      email,
      // An Admin: the role that may approve account-wide data scopes, which most tests ask for.
      role: overrides.role ?? 'admin',
      department: overrides.department === undefined ? 'Operations' : overrides.department,
      job_title: 'Shift lead',
      active: overrides.active ?? 1,
      vendor_support: overrides.vendor_support ?? 0,
      password_hash: cheapPasswordHash(PASSWORD),
      created_at: '2026-01-01T00:00:00.000Z',
    })
    .execute();
  return { id, email };
}

export async function seedClient(
  db: Kysely<Database>,
  accountId: string,
  isPublic = false,
): Promise<{ clientId: string; clientSecret: string | null }> {
  const { client, clientSecret } = await oauthClientService.create(db, {
    accountId,
    name: 'Partner App',
    redirectUris: [REDIRECT_URI],
    isPublic,
  });
  return { clientId: client.client_id, clientSecret };
}

/** openid-client's view of the server, through discovery, for one client. */
export function discover(server: OauthServer, clientId: string, clientSecret: string | null) {
  return oidc.discovery(
    server.issuer,
    clientId,
    undefined,
    clientSecret === null ? oidc.None() : oidc.ClientSecretBasic(clientSecret),
    { execute: [oidc.allowInsecureRequests] },
  );
}

/** A person at a browser: follows redirects on the server's origin and keeps its cookies. */
export class Browser {
  private readonly cookies = new Map<string, string>();

  readonly origin: string;

  constructor(origin: string) {
    this.origin = origin;
  }

  cookie(name: string): string | undefined {
    return this.cookies.get(name);
  }

  /** GET `url`, or POST `form` to it as a browser does (entries may repeat a name). */
  request(url: string, form?: Record<string, string> | [string, string][]): Promise<Response> {
    return this.send(
      url,
      form === undefined
        ? undefined
        : { type: 'application/x-www-form-urlencoded', text: new URLSearchParams(form).toString() },
    );
  }

  /** POST `value` as JSON, as a script rather than a browser form could. */
  postJson(url: string, value: unknown): Promise<Response> {
    return this.send(url, { type: 'application/json', text: JSON.stringify(value) });
  }

  private async send(url: string, body?: { type: string; text: string }): Promise<Response> {
    const headers: Record<string, string> = {};
    if (this.cookies.size > 0) {
      headers.cookie = [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
    }
    if (body !== undefined) headers['content-type'] = body.type;
    const response = await fetch(new URL(url, this.origin), {
      method: body === undefined ? 'GET' : 'POST',
      headers,
      body: body?.text,
      redirect: 'manual',
    });
    for (const cookie of response.headers.getSetCookie()) {
      const [pair = '', ...attributes] = cookie.split(';');
      const [name = '', value = ''] = pair.split('=');
      const expired = attributes.some((a) => /^\s*expires=Thu, 01 Jan 1970/i.test(a));
      if (expired || value === '') this.cookies.delete(name.trim());
      else this.cookies.set(name.trim(), value);
    }
    return response;
  }

  /** Requests `url` and follows redirects while they stay on the server; returns the last answer. */
  async follow(url: string, form?: Record<string, string>): Promise<{ url: string; response: Response }> {
    let current = new URL(url, this.origin).href;
    let response = await this.request(current, form);
    while (response.status >= 300 && response.status < 400) {
      current = new URL(response.headers.get('location') as string, current).href;
      if (!current.startsWith(this.origin)) return { url: current, response };
      response = await this.request(current);
    }
    return { url: current, response };
  }
}

export interface HtmlForm {
  action: string;
  fields: Record<string, string>;
}

/** The forms of a page, with their hidden fields, as a person's browser would submit them. */
export function formsOf(html: string): HtmlForm[] {
  return [...html.matchAll(/<form[^>]*action="([^"]+)"[^>]*>([\s\S]*?)<\/form>/g)].map((match) => ({
    action: (match[1] as string).replaceAll('&amp;', '&'),
    fields: Object.fromEntries(
      [...(match[2] as string).matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m) => [
        m[1] as string,
        m[2] as string,
      ]),
    ),
  }));
}

/**
 * An authorization request with a fresh PKCE (S256) pair, as a partner app builds it; returns the
 * URL to send the browser to and the verifier that later redeems the code.
 */
export async function authorizationRequest(
  config: oidc.Configuration,
  options: { scope: string; redirectUri?: string; state?: string },
): Promise<{ url: URL; verifier: string }> {
  const verifier = oidc.randomPKCECodeVerifier();
  const url = oidc.buildAuthorizationUrl(config, {
    redirect_uri: options.redirectUri ?? REDIRECT_URI,
    scope: options.scope,
    ...(options.state === undefined ? {} : { state: options.state }),
    code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
  });
  return { url, verifier };
}

/**
 * Signs in on the real sign-in page and allows access on the real consent page; returns the
 * callback URL the browser is sent back to (carrying `code` or `error`).
 */
export async function signInAndConsent(
  browser: Browser,
  authorizationUrl: URL,
  credentials: { email: string; password: string },
): Promise<URL> {
  const signIn = await browser.follow(authorizationUrl.href);
  assert.equal(signIn.response.status, 200, 'the sign-in page is shown');
  const [loginForm] = formsOf(await signIn.response.text());
  assert.ok(loginForm, 'the sign-in page has a form');
  const consent = await browser.follow(loginForm.action, { ...loginForm.fields, ...credentials });
  if (!consent.url.startsWith(browser.origin)) return new URL(consent.url);
  assert.equal(consent.response.status, 200, 'the consent page is shown');
  const [allow] = formsOf(await consent.response.text());
  assert.ok(allow, 'the consent page has an Allow form');
  const done = await browser.follow(allow.action, allow.fields);
  return new URL(done.url);
}
