import { roleName } from '../auth/roles.ts';
import type { AccountRow } from '../db/repositories/accounts.ts';
import type { AdminSessionWithUser } from '../db/repositories/admin-sessions.ts';
import type { UserAccountRow } from '../db/repositories/users.ts';

/** What the panel needs to know about a person to decide whether they may manage API keys. */
export interface AdminPrincipal {
  userId: string;
  name: string;
  email: string;
  role: string;
  active: number;
  vendorSupport: number;
  accountId: string;
  accountName: string;
  apiAccess: number;
}

export function principalOfSession(row: AdminSessionWithUser): AdminPrincipal {
  return {
    userId: row.user_id,
    name: row.user_name,
    email: row.user_email,
    role: row.user_role,
    active: row.user_active,
    vendorSupport: row.user_vendor_support,
    accountId: row.user_account_id,
    accountName: row.account_name,
    apiAccess: row.account_api_access,
  };
}

export function principalOfUser(user: UserAccountRow, account: AccountRow): AdminPrincipal {
  return {
    userId: user.id,
    name: user.name,
    email: user.email,
    role: user.role,
    active: user.active,
    vendorSupport: user.vendor_support,
    accountId: account.id,
    accountName: account.name,
    apiAccess: account.api_access,
  };
}

/**
 * Why this person may not manage API keys, or null if they may. Checked at sign-in and again on
 * every request, so a demotion or a plan change takes effect at once.
 */
export function refusalReason(principal: AdminPrincipal): string | null {
  if (principal.active !== 1) return 'Your user account is deactivated.';
  if (principal.vendorSupport === 1)
    return 'Vendor support users cannot manage API keys or webhooks of a customer account.';
  if (principal.role !== 'super_admin') {
    return `Managing API keys and webhooks requires the Super Admin role; your role is ${roleName(principal.role)}.`;
  }
  if (principal.apiAccess !== 1) {
    return `The plan of ${principal.accountName} does not include API access, so API keys and webhooks cannot be managed.`;
  }
  return null;
}
