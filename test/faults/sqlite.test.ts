import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import SqliteDatabase from 'better-sqlite3';
import { hashPassword } from '../../src/auth/passwords.ts';
import { apiKeyRepository } from '../../src/db/repositories/api-keys.ts';
import { bearer, STORES, seedAccount, seedKey } from '../helpers.ts';
import { AdminClient, seedUser as seedAdmin } from '../routes/admin/admin-helpers.ts';
import { createFaultContext, type FaultContext, timed } from './harness.ts';
import { sleep } from '../wait.ts';

/** Bound for a read while another process holds the write lock: no event-loop freeze. */
const READ_MAX_MS = 300;
/** Bound for a write meeting the lock: the busy deadline is ~2 s. */
const WRITE_MAX_MS = 3000;

if (STORES.includes('sqlite')) {
  describe('SQLite write lock held by another process (BEGIN IMMEDIATE)', () => {
    let ctx: FaultContext;
    let rawKey: string;
    let keyId: string;
    let email: string;

    before(async () => {
      ctx = await createFaultContext('sqlite');
      const accountId = await seedAccount(ctx.db, { rate_limit_per_hour: 100_000 });
      ({ rawKey, id: keyId } = await seedKey(ctx.db, accountId));
      ({ email } = await seedAdmin(ctx.db, accountId));
    });
    after(() => ctx?.close());

    const get = () =>
      ctx.app.inject({ method: 'GET', url: '/api/v1/public/departments', headers: bearer(rawKey) });

    /** Another connection (as a CLI import would) holds the write lock until the returned call. */
    function holdWriteLock(): () => void {
      const other = new SqliteDatabase(ctx.databaseUrl.slice('sqlite:'.length));
      other.exec('BEGIN IMMEDIATE');
      const release = () => {
        if (!other.open) return;
        other.exec('COMMIT');
        other.close();
      };
      // Released by the test once it has its answers; at the latest after 15 s, should it fail
      // halfway. Not sooner: on a busy machine the work before a write meets the lock (a
      // password's hash) can take seconds, and a lock let go meanwhile is a test of nothing.
      setTimeout(release, 15_000).unref();
      return release;
    }

    test('admin sign-in answers 503 + Retry-After within ~3 s of the password work while reads stay quick; later it signs in', async () => {
      const admin = new AdminClient(ctx.app);
      const form = await admin.get('/admin/sign-in');
      assert.equal((await get()).statusCode, 200);

      // Before its write meets the lock, the sign-in re-hashes the seeded (cheap) password at the
      // production cost: CPU work on top of the store's deadline, which a loaded machine can
      // stretch to seconds by itself. Measured beside it, the same work started at the same
      // moment, so that both meet the same load (the reads below included).
      const release = holdWriteLock();
      try {
        const signIn = timed(() =>
          admin.post('/admin/sign-in', {
            _csrf: /name="_csrf" value="([^"]+)"/.exec(form.body)?.[1] ?? '',
            email,
            password: 'correct horse battery staple',
          }),
        );
        const passwordWork = timed(() => hashPassword('the work a sign-in does first'));
        // Reads issued while the sign-in keeps meeting the lock are answered at once.
        await sleep(50);
        for (let i = 0; i < 10; i += 1) {
          const { result, ms } = await timed(get);
          assert.equal(result.statusCode, 200);
          assert.ok(ms < READ_MAX_MS, `read answered in ${Math.round(ms)} ms`);
          await sleep(50);
        }
        const { result, ms } = await signIn;
        const { ms: passwordMs } = await passwordWork;
        assert.equal(result.statusCode, 503);
        assert.ok(Number(result.headers['retry-after']) >= 1);
        assert.match(String(result.headers['content-type']), /text\/html/);
        assert.ok(
          ms < WRITE_MAX_MS + passwordMs,
          `sign-in answered in ${Math.round(ms)} ms (its password work alone: ${Math.round(passwordMs)} ms)`,
        );
      } finally {
        release();
      }
      assert.equal((await admin.signIn(email)).statusCode, 303, 'signs in once the lock is gone');
    });

    test('the changes feed reads its snapshot at once: a read-only transaction takes no write lock', async () => {
      const feed = () =>
        ctx.app.inject({ method: 'GET', url: '/api/v1/public/changes', headers: bearer(rawKey) });
      // The first page generates the cursor key, a write.
      assert.equal((await feed()).statusCode, 200);
      const release = holdWriteLock();
      try {
        const { result, ms } = await timed(feed);
        assert.equal(result.statusCode, 200);
        assert.ok(ms < READ_MAX_MS, `feed page answered in ${Math.round(ms)} ms`);
      } finally {
        release();
      }
    });

    test('the last-use flush gives up in ~2 s without freezing reads and keeps its uses for the next pass', async () => {
      // Later than any use the requests above recorded: last_used_at only moves forward.
      const usedAt = new Date(Date.now() + 3_600_000);
      // The server's own flush (every 5 s) may still be retrying the earlier tests' uses against their
      // locks; flushes run one after another, so the flush measured here would wait for it first.
      await ctx.runtime.lastUse.flush();
      const release = holdWriteLock();
      try {
        ctx.runtime.lastUse.record(keyId, usedAt);
        const flush = timed(() => ctx.runtime.lastUse.flush());
        await sleep(50);
        const read = await timed(get);
        assert.equal(read.result.statusCode, 200);
        assert.ok(read.ms < READ_MAX_MS, `read answered in ${Math.round(read.ms)} ms`);
        const { ms } = await flush;
        assert.ok(ms < WRITE_MAX_MS, `flush ended in ${Math.round(ms)} ms`);
        const row = await apiKeyRepository.findById(ctx.db, keyId);
        assert.notEqual(row?.last_used_at, usedAt.toISOString(), 'not written while locked');
      } finally {
        release();
      }
      await ctx.runtime.lastUse.flush();
      const row = await apiKeyRepository.findById(ctx.db, keyId);
      assert.equal(row?.last_used_at, usedAt.toISOString(), 'written by the next pass');
    });
  });
}
