/** The user roles an account has; only `super_admin` may manage API keys (DESIGN: Roles). */
export const USER_ROLES = ['super_admin', 'admin', 'manager', 'employee'] as const;

export type UserRole = (typeof USER_ROLES)[number];

const ROLE_NAMES: Record<UserRole, string> = {
  super_admin: 'Super Admin',
  admin: 'Admin',
  manager: 'Manager',
  employee: 'Employee',
};

/** A role as a person reads it; a value the store holds but this version does not know, as is. */
export function roleName(role: string): string {
  return ROLE_NAMES[role as UserRole] ?? role;
}
