import { randomUUID } from 'node:crypto';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import type { Kysely } from 'kysely';
import { cheapPasswordHash } from '../../auth/password-fixtures.ts';
import type { Database } from '../../../src/db/schema.ts';

/** Admin panel test support: users with passwords and a cookie-keeping client over `app.inject`. */

export const PASSWORD = 'correct horse battery staple';

export interface SeededUser {
  id: string;
  email: string;
  name: string;
}

export async function seedUser(
  db: Kysely<Database>,
  accountId: string,
  overrides: Partial<{ role: string; active: number; vendor_support: number; name: string }> = {},
): Promise<SeededUser> {
  const id = randomUUID();
  const email = `user-${id.slice(0, 8)}@example.test`;
  const name = overrides.name ?? `User ${id.slice(0, 8)}`;
  await db
    .insertInto('users')
    .values({
      id,
      account_id: accountId,
      name,
      email,
      role: overrides.role ?? 'super_admin',
      department: null,
      job_title: null,
      active: overrides.active ?? 1,
      vendor_support: overrides.vendor_support ?? 0,
      password_hash: cheapPasswordHash(PASSWORD),
      created_at: '2026-01-01T00:00:00.000Z',
    })
    .execute();
  return { id, email, name };
}

/** The CSRF token of the first form on a page. */
export function csrfTokenOf(page: string): string {
  const match = /name="_csrf" value="([^"]+)"/.exec(page);
  if (match === null) throw new Error('no CSRF field on the page');
  return match[1] as string;
}

/** A browser stand-in: keeps the cookies the panel sets and sends them back. */
export class AdminClient {
  readonly cookies = new Map<string, string>();

  private readonly app: FastifyInstance;
  private readonly remoteAddress: string;

  constructor(app: FastifyInstance, remoteAddress = '127.0.0.1') {
    this.app = app;
    this.remoteAddress = remoteAddress;
  }

  private keep(res: LightMyRequestResponse): LightMyRequestResponse {
    for (const cookie of res.cookies as { name: string; value: string; maxAge?: number; expires?: Date }[]) {
      const cleared =
        cookie.value === '' || (cookie.expires !== undefined && cookie.expires.getTime() < Date.now());
      if (cleared) this.cookies.delete(cookie.name);
      else this.cookies.set(cookie.name, cookie.value);
    }
    return res;
  }

  private get cookieHeader(): Record<string, string> {
    return Object.fromEntries(this.cookies);
  }

  /** Sends a request from this browser: its cookies and address; keeps the cookies it is given. */
  private async send(request: {
    method: 'GET' | 'POST';
    url: string;
    contentType?: string;
    payload?: string;
  }): Promise<LightMyRequestResponse> {
    const { contentType, ...rest } = request;
    return this.keep(
      await this.app.inject({
        ...rest,
        cookies: this.cookieHeader,
        remoteAddress: this.remoteAddress,
        ...(contentType === undefined ? {} : { headers: { 'content-type': contentType } }),
      }),
    );
  }

  get(url: string): Promise<LightMyRequestResponse> {
    return this.send({ method: 'GET', url });
  }

  post(url: string, form: Record<string, string>): Promise<LightMyRequestResponse> {
    return this.send({
      method: 'POST',
      url,
      contentType: 'application/x-www-form-urlencoded',
      payload: new URLSearchParams(form).toString(),
    });
  }

  /**
   * Posts `body` as JSON with the CSRF token of `page`: the panel reads JSON bodies too, and JSON
   * can carry what a form cannot, such as half of a surrogate pair (`\ud800` alone).
   */
  submitJson(page: string, url: string, body: Record<string, string>): Promise<LightMyRequestResponse> {
    return this.send({
      method: 'POST',
      url,
      contentType: 'application/json',
      payload: JSON.stringify({ _csrf: csrfTokenOf(page), ...body }),
    });
  }

  /** Posts a form of `page` with the page's CSRF token, as a browser submitting it would. */
  async submit(
    page: string,
    url: string,
    form: Record<string, string> = {},
  ): Promise<LightMyRequestResponse> {
    return this.post(url, { _csrf: csrfTokenOf(page), ...form });
  }

  async signIn(email: string, password = PASSWORD): Promise<LightMyRequestResponse> {
    const form = await this.get('/admin/sign-in');
    return this.submit(form.body, '/admin/sign-in', { email, password });
  }
}
