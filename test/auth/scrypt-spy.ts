import crypto from 'node:crypto';
import { syncBuiltinESMExports } from 'node:module';
import { mock } from 'node:test';

/**
 * Counts calls of `crypto.scrypt` (the asynchronous one that password checks use) while it is
 * installed. `syncBuiltinESMExports` makes the named import in src/auth/passwords.ts see the spy.
 */
export function spyOnScrypt(): { calls(): number; restore(): void } {
  const spy = mock.method(crypto, 'scrypt');
  syncBuiltinESMExports();
  return {
    calls: () => spy.mock.callCount(),
    restore() {
      spy.mock.restore();
      syncBuiltinESMExports();
    },
  };
}
