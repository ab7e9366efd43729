import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { SIGN_IN_COOKIE } from '../src/admin/sessions.ts';
import { OAUTH_PATH } from '../src/paths.ts';
import { csrfTokenOf, seedUser } from './routes/admin/admin-helpers.ts';
import { createTestContext, STORES, seedAccount, type TestContext } from './helpers.ts';

/** The application of `createTestContext`, listening on a free loopback port. */
async function listening(env: Record<string, string> = {}): Promise<{ ctx: TestContext; base: string }> {
  const ctx = await createTestContext(STORES[0] ?? 'sqlite', env);
  await ctx.app.listen({ port: 0, host: '127.0.0.1' });
  return { ctx, base: `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}` };
}

const HSTS = 'max-age=31536000; includeSubDomains';
const SURFACES = [
  '/api/v1/public/users',
  '/api/v1/users',
  '/admin/sign-in',
  `${OAUTH_PATH}/.well-known/openid-configuration`,
  '/healthz',
  '/no/such/page',
];

describe('HSTS', () => {
  test('with an https BASE_URL every surface (API, wider API, admin, OAuth, health, 404) sends it', async () => {
    const { ctx, base } = await listening({ BASE_URL: 'https://api.example.test' });
    try {
      for (const path of SURFACES) {
        const res = await fetch(`${base}${path}`);
        await res.arrayBuffer();
        assert.equal(res.headers.get('strict-transport-security'), HSTS, path);
      }
    } finally {
      await ctx.close();
    }
  });

  test('with an http BASE_URL none does', async () => {
    const { ctx, base } = await listening({ BASE_URL: 'http://localhost:8080' });
    try {
      for (const path of SURFACES) {
        const res = await fetch(`${base}${path}`);
        await res.arrayBuffer();
        assert.equal(res.headers.get('strict-transport-security'), null, path);
      }
    } finally {
      await ctx.close();
    }
  });
});

/** One admin sign-in attempt with a wrong password, claiming to come from `forwardedFor`. */
async function failedSignIn(base: string, email: string, forwardedFor: string): Promise<number> {
  const headers = { 'x-forwarded-for': forwardedFor };
  const form = await fetch(`${base}/admin/sign-in`, { headers });
  const cookie = (form.headers.getSetCookie().find((c) => c.startsWith(`${SIGN_IN_COOKIE}=`)) ?? '').split(
    ';',
  )[0];
  const res = await fetch(`${base}/admin/sign-in`, {
    method: 'POST',
    headers: { ...headers, cookie: cookie ?? '', 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _csrf: csrfTokenOf(await form.text()), email, password: 'wrong' }).toString(),
    redirect: 'manual',
  });
  await res.arrayBuffer();
  return res.status;
}

/**
 * A listening application with 21 users whose passwords are hashed at a cheap cost, so each wrong
 * attempt below costs milliseconds: the throttle counts attempts, not the password work. (An
 * unknown email would be checked against a decoy at the production cost, seconds on a busy machine.)
 */
async function listeningWithUsers(env: Record<string, string> = {}) {
  const listener = await listening(env);
  const accountId = await seedAccount(listener.ctx.db);
  const emails: string[] = [];
  for (let i = 0; i < 21; i += 1) emails.push((await seedUser(listener.ctx.db, accountId)).email);
  return { ...listener, emails };
}

/** 21 attempts, each for another email; `forwardedFor(i)` is the X-Forwarded-For of attempt i. */
async function twentyOneAttempts(
  { base, emails }: { base: string; emails: string[] },
  forwardedFor: (i: number) => string,
): Promise<number[]> {
  const statuses: number[] = [];
  for (const [i, email] of emails.entries())
    statuses.push(await failedSignIn(base, email, forwardedFor(i + 1)));
  return statuses;
}

describe('TRUST_PROXY and the sign-in throttle per client address', () => {
  let untrusting: { ctx: TestContext; base: string; emails: string[] };
  let trusting: { ctx: TestContext; base: string; emails: string[] };

  before(async () => {
    untrusting = await listeningWithUsers();
    trusting = await listeningWithUsers({ TRUST_PROXY: '127.0.0.1' });
  });
  after(async () => {
    await untrusting.ctx.close();
    await trusting.ctx.close();
  });

  test('not set: a spoofed X-Forwarded-For does not change the address; the 21st attempt is refused', async () => {
    const statuses = await twentyOneAttempts(untrusting, (i) => `198.51.100.${i}`);
    assert.deepEqual(statuses, [...Array(20).fill(401), 429]);
  });

  test('the peer listed: the forwarded client address is the one counted', async () => {
    const spread = await twentyOneAttempts(trusting, (i) => `198.51.100.${i}`);
    assert.deepEqual(spread, Array(21).fill(401), 'each forwarded address has its own count');
    const one = await twentyOneAttempts(trusting, () => '203.0.113.7, 192.0.2.9');
    assert.deepEqual(one, [...Array(20).fill(401), 429], 'the rightmost untrusted address counts');
  });
});
