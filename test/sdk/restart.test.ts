import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import { createClient } from '../../packages/sdk/src/index.ts';
import {
  createSecondInstance,
  createTestContext,
  STORES,
  seedAccount,
  seedIncidents,
  seedKey,
} from '../helpers.ts';

/**
 * What an integrator's nightly walk meets during a deployment: the instance it talks to stops
 * between two pages and another one starts on the same address. The walk goes on where it was.
 */

for (const store of STORES) {
  describe(`SDK across a server restart (${store})`, () => {
    test('the server stopped and started again between two pages: the iteration completes', async () => {
      const ctx = await createTestContext(store);
      let restarted: Awaited<ReturnType<typeof createSecondInstance>> | undefined;
      try {
        const accountId = await seedAccount(ctx.db);
        await seedIncidents(ctx.db, accountId, 5);
        const { rawKey } = await seedKey(ctx.db, accountId);
        await ctx.app.listen({ port: 0, host: '127.0.0.1' });
        const { port } = ctx.app.server.address() as AddressInfo;

        // Network failures as the client's fetch sees them, the first one awaited below.
        const failures: unknown[] = [];
        let failed!: () => void;
        const firstFailure = new Promise<void>((resolve) => {
          failed = resolve;
        });
        const client = createClient({
          baseUrl: `http://127.0.0.1:${port}`,
          apiKey: rawKey,
          // Time enough for the new instance to listen, however busy the machine.
          retry: { maxAttempts: 10 },
          fetch: async (request: Request) => {
            try {
              return await fetch(request);
            } catch (error) {
              failures.push(error);
              failed();
              throw error;
            }
          },
        });

        const walk = client.incidents({ limit: 2 })[Symbol.asyncIterator]();
        const seen: string[] = [];
        for (let i = 0; i < 2; i += 1) {
          const { value } = await walk.next();
          seen.push(value!.incident_number);
        }
        // Page 1 is read; the next row needs page 2. The next instance is built (not listening),
        // and the first one stops.
        restarted = await createSecondInstance(ctx);
        await ctx.app.close();
        const pending = walk.next();
        await firstFailure;
        await restarted.app.listen({ port, host: '127.0.0.1' });
        for (let row = await pending; row.done !== true; row = await walk.next())
          seen.push(row.value.incident_number);

        assert.deepEqual(seen, ['INC-2025-5', 'INC-2025-4', 'INC-2025-3', 'INC-2025-2', 'INC-2025-1']);
        assert.ok(failures.length >= 1, 'the stopped server refused the client at least once');
        assert.ok(
          failures.every((error) => error instanceof TypeError),
          `network failures only: ${failures.map(String).join(', ')}`,
        );
      } finally {
        await restarted?.close();
        await ctx.close();
      }
    });
  });
}
