import { randomUUID } from 'node:crypto';

/** Import records of an account that the client tests (TypeScript SDK, Python client) seed. */

/** A department or location called `name`. */
export const named = (type: 'department' | 'location', accountId: string, name: string) => ({
  type,
  id: randomUUID(),
  account_id: accountId,
  name,
});

/** A manager called `name`, with an email of its own. */
export const user = (accountId: string, name: string) => ({
  type: 'user',
  id: randomUUID(),
  account_id: accountId,
  name,
  email: `${name.toLowerCase()}-${randomUUID().slice(0, 8)}@example.com`,
  role: 'manager',
});
