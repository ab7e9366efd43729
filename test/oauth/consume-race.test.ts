import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import * as oidc from 'openid-client';
import { STORES, seedAccount } from '../helpers.ts';
import {
  authorizationRequest,
  Browser,
  discover,
  type OauthServer,
  PASSWORD,
  seedClient,
  seedUser,
  signInAndConsent,
  startOauthServer,
} from './harness.ts';

/**
 * Single use under concurrency: two requests presenting one refresh token (or one authorization
 * code) at the same moment. At most one may succeed; the other is reuse: invalid_grant, and the
 * grant is revoked.
 */

const TRIALS = 4;

for (const store of STORES) {
  describe(`single-use OAuth credentials under concurrent use (${store})`, () => {
    let server: OauthServer;
    let user: { id: string; email: string };
    let client: { clientId: string; clientSecret: string | null };
    let config: oidc.Configuration;

    before(async () => {
      server = await startOauthServer(store);
      const accountId = await seedAccount(server.ctx.db);
      user = await seedUser(server.ctx.db, accountId, { role: 'admin' });
      client = await seedClient(server.ctx.db, accountId);
      config = await discover(server, client.clientId, client.clientSecret);
    });
    after(() => server.close());

    async function codeAndVerifier(): Promise<{ code: string; verifier: string }> {
      const { url, verifier } = await authorizationRequest(config, { scope: 'openid users:read' });
      const callback = await signInAndConsent(new Browser(server.baseUrl), url, {
        email: user.email,
        password: PASSWORD,
      });
      return { code: callback.searchParams.get('code') as string, verifier };
    }

    function tokenRequest(body: Record<string, string>): Promise<Response> {
      const basic = Buffer.from(`${client.clientId}:${client.clientSecret}`).toString('base64');
      return fetch(`${server.issuer.href}/token`, {
        method: 'POST',
        headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(body),
      });
    }

    interface Answer {
      status: number;
      error?: string;
      access_token?: string;
      refresh_token?: string;
    }

    async function both(body: Record<string, string>): Promise<Answer[]> {
      const responses = await Promise.all([tokenRequest(body), tokenRequest(body)]);
      return Promise.all(
        responses.map(async (res) => ({
          status: res.status,
          ...((await res.json()) as Omit<Answer, 'status'>),
        })),
      );
    }

    test('two concurrent refreshes of one refresh token: at most one succeeds, the other is invalid_grant', async () => {
      for (let trial = 0; trial < TRIALS; trial += 1) {
        const { code, verifier } = await codeAndVerifier();
        const first = await tokenRequest({
          grant_type: 'authorization_code',
          code,
          code_verifier: verifier,
          redirect_uri: 'http://127.0.0.1:9/callback',
        });
        assert.equal(first.status, 200);
        const { refresh_token: refreshToken } = (await first.json()) as { refresh_token: string };

        const answers = await both({ grant_type: 'refresh_token', refresh_token: refreshToken });
        const winners = answers.filter((a) => a.status === 200);
        assert.ok(winners.length <= 1, `trial ${trial}: ${JSON.stringify(answers)}`);
        for (const lost of answers.filter((a) => a.status !== 200)) {
          assert.equal(lost.status, 400);
          assert.equal(lost.error, 'invalid_grant');
        }
        // The loser presented a spent refresh token: reuse, so the whole grant is revoked, and
        // that includes the tokens the winner got in the same instant.
        const [winner] = winners;
        if (winner !== undefined) {
          const read = await fetch(`${server.baseUrl}/api/v1/users`, {
            headers: { authorization: `Bearer ${winner.access_token}` },
          });
          assert.equal(read.status, 401, `trial ${trial}: the winner's access token still reads`);
          const again = await tokenRequest({
            grant_type: 'refresh_token',
            refresh_token: String(winner.refresh_token),
          });
          assert.equal(again.status, 400, `trial ${trial}: the winner's refresh token still works`);
        }
      }
    });

    test('two concurrent redemptions of one authorization code: at most one succeeds', async () => {
      for (let trial = 0; trial < TRIALS; trial += 1) {
        const { code, verifier } = await codeAndVerifier();
        const answers = await both({
          grant_type: 'authorization_code',
          code,
          code_verifier: verifier,
          redirect_uri: 'http://127.0.0.1:9/callback',
        });
        const won = answers.filter((a) => a.status === 200).length;
        assert.ok(won <= 1, `trial ${trial}: ${JSON.stringify(answers)}`);
        for (const lost of answers.filter((a) => a.status !== 200)) {
          assert.equal(lost.status, 400);
          assert.equal(lost.error, 'invalid_grant');
        }
      }
    });
  });
}
