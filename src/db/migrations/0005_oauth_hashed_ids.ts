import { createHash } from 'node:crypto';
import { type Kysely, sql } from 'kysely';

/**
 * OAuth records at rest: a backup of oauth_payloads used to hold live tokens for 30 days. Rows of
 * bearer models (whose id is what a client or browser presents) are re-keyed by the SHA-256 of
 * their id, and the raw id (`jti`, and the session id an interaction keeps as `session.cookie`)
 * leaves the payload. A `user_id` column, from the payload's `accountId`, lets a new password end
 * everything the old one opened.
 *
 * Self-contained on purpose: the adapter may change, what this migration did may not.
 */

const BEARER_MODELS = ['AccessToken', 'RefreshToken', 'AuthorizationCode', 'ClientCredentials', 'Session'];

interface StoredPayload {
  jti?: string;
  accountId?: string;
  session?: { accountId?: string; cookie?: string };
}

const sha256 = (value: string): string => createHash('sha256').update(value).digest('hex');

// Re-keys stored tokens by their hash: the previous release looks them up, and writes them,
// by their raw id.
export const additive = false;

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('oauth_payloads').addColumn('user_id', 'text').execute();
  await db.schema.createIndex('oauth_payloads_user_id').on('oauth_payloads').column('user_id').execute();

  const { rows } = await sql<{ model: string; id: string; payload: string }>`
    select model, id, payload from oauth_payloads`.execute(db);
  for (const row of rows) {
    const payload = JSON.parse(row.payload) as StoredPayload;
    const bearer = BEARER_MODELS.includes(row.model);
    if (bearer) delete payload.jti;
    if (payload.session !== undefined) delete payload.session.cookie;
    const userId = payload.accountId ?? payload.session?.accountId ?? null;
    await sql`
      update oauth_payloads
      set id = ${bearer ? sha256(row.id) : row.id}, payload = ${JSON.stringify(payload)}, user_id = ${userId}
      where model = ${row.model} and id = ${row.id}`.execute(db);
  }
}

export async function down(db: Kysely<unknown>): Promise<void> {
  // Hashed ids cannot be turned back into tokens: the bearer rows are dropped, as a sign-out.
  await sql`delete from oauth_payloads where model in (${sql.join(BEARER_MODELS)})`.execute(db);
  await db.schema.dropIndex('oauth_payloads_user_id').execute();
  await db.schema.alterTable('oauth_payloads').dropColumn('user_id').execute();
}
