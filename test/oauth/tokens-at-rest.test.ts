import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Migrator, sql } from 'kysely';
import * as oidc from 'openid-client';
import { openDatabase } from '../../src/db/database.ts';
import { migrations } from '../../src/db/migrate.ts';
import { createTestDatabase, STORES, seedAccount } from '../helpers.ts';
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
 * OAuth tokens, codes and sessions at rest: a copy of oauth_payloads must not hold any value a
 * client or browser could present. Rows are keyed by the SHA-256 of such values.
 */

const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

for (const store of STORES) {
  describe(`OAuth records at rest (${store})`, () => {
    let server: OauthServer;

    before(async () => {
      server = await startOauthServer(store);
    });
    after(() => server.close());

    test('after a code + refresh + client-credentials flow, the table holds none of the raw values', async () => {
      const accountId = await seedAccount(server.ctx.db);
      const user = await seedUser(server.ctx.db, accountId, { role: 'admin' });
      const client = await seedClient(server.ctx.db, accountId);
      const config = await discover(server, client.clientId, client.clientSecret);

      const browser = new Browser(server.baseUrl);
      const { url, verifier } = await authorizationRequest(config, { scope: 'openid users:read' });
      const callback = await signInAndConsent(browser, url, { email: user.email, password: PASSWORD });
      const code = callback.searchParams.get('code') as string;
      const session = browser.cookie('safety_oauth_session') as string;
      const tokens = await oidc.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier });
      const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token as string);
      const machine = await oidc.clientCredentialsGrant(config, { scope: 'users:read' });

      const secrets = {
        code,
        session,
        access: tokens.access_token,
        refresh: tokens.refresh_token as string,
        refreshedAccess: refreshed.access_token,
        refreshedRefresh: refreshed.refresh_token as string,
        clientCredentials: machine.access_token,
      };
      for (const [name, value] of Object.entries(secrets)) assert.ok(value, `${name} was issued`);

      const rows = await server.ctx.db.selectFrom('oauth_payloads').selectAll().execute();
      const dump = JSON.stringify(rows);
      for (const [name, value] of Object.entries(secrets)) {
        assert.ok(!dump.includes(value), `the raw ${name} is not stored`);
      }
      // Each is stored under its hash instead, with the user it acts for.
      const byId = new Map(rows.map((row) => [`${row.model}:${row.id}`, row]));
      assert.equal(byId.get(`AccessToken:${sha256(secrets.refreshedAccess)}`)?.user_id, user.id);
      assert.equal(byId.get(`RefreshToken:${sha256(secrets.refreshedRefresh)}`)?.user_id, user.id);
      assert.equal(byId.get(`Session:${sha256(secrets.session)}`)?.user_id, user.id);
      assert.ok(byId.has(`ClientCredentials:${sha256(secrets.clientCredentials)}`));

      // And lookups hash what they are given: the tokens still work.
      const api = await fetch(`${server.baseUrl}/api/v1/users`, {
        headers: { authorization: `Bearer ${secrets.refreshedAccess}` },
      });
      assert.equal(api.status, 200);
      const machineApi = await fetch(`${server.baseUrl}/api/v1/users`, {
        headers: { authorization: `Bearer ${secrets.clientCredentials}` },
      });
      assert.equal(machineApi.status, 200);
      const again = await oidc.refreshTokenGrant(config, secrets.refreshedRefresh);
      assert.ok(again.access_token);
    });
  });

  describe(`migration 0005 on existing OAuth records (${store})`, () => {
    test('existing token rows are re-keyed by their hash, lose the raw id, and gain user_id', async () => {
      const database = await createTestDatabase(store);
      const handle = openDatabase(database.url, () => {});
      try {
        const migrator = new Migrator({ db: handle.db, provider: { getMigrations: async () => migrations } });
        const before = await migrator.migrateTo('0004_drop_incidents_created_index');
        assert.equal(before.error, undefined);

        const token = `raw-${randomUUID()}`;
        const sessionId = `sess-${randomUUID()}`;
        const userId = randomUUID();
        const rows = [
          {
            model: 'RefreshToken',
            id: token,
            payload: { jti: token, accountId: userId, grantId: 'g1', kind: 'RefreshToken' },
          },
          {
            model: 'Session',
            id: sessionId,
            payload: { jti: sessionId, uid: 'u1', accountId: userId, kind: 'Session' },
          },
          {
            model: 'Interaction',
            id: 'i1',
            payload: { jti: 'i1', session: { accountId: userId, uid: 'u1', cookie: sessionId } },
          },
          { model: 'Grant', id: 'g1', payload: { jti: 'g1', accountId: userId, kind: 'Grant' } },
        ];
        for (const row of rows) {
          await sql`insert into oauth_payloads (model, id, payload, grant_id) values (${row.model}, ${row.id}, ${JSON.stringify(row.payload)}, ${row.model === 'RefreshToken' ? 'g1' : null})`.execute(
            handle.db,
          );
        }

        const after = await migrator.migrateToLatest();
        assert.equal(after.error, undefined);
        const stored = await handle.db.selectFrom('oauth_payloads').selectAll().execute();
        const dump = JSON.stringify(stored);
        assert.ok(!dump.includes(token), 'no raw refresh token');
        assert.ok(!dump.includes(sessionId), 'no raw session id, not even in the interaction');
        const find = (model: string) => stored.find((row) => row.model === model);
        assert.equal(find('RefreshToken')?.id, sha256(token));
        assert.equal(find('Session')?.id, sha256(sessionId));
        assert.equal(find('Grant')?.id, 'g1', 'a grant id is not a credential and stays');
        for (const row of stored) assert.equal(row.user_id, userId, row.model);
      } finally {
        await handle.destroy();
        await database.drop();
      }
    });
  });
}
