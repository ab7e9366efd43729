/**
 * The scopes of the authorization server. OpenID scopes select userinfo claims; the API scopes
 * each open one list of the wider API (`/api/v1/<resource>`).
 */

/** Claims released per OpenID scope. `employment` carries the work fields of the user record. */
export const CLAIMS_BY_SCOPE = {
  openid: ['sub'],
  profile: ['name'],
  email: ['email'],
  employment: ['role', 'department', 'job_title'],
} as const;

export const WIDER_API_RESOURCES = ['users', 'departments', 'locations', 'incidents'] as const;
export type WiderApiResource = (typeof WIDER_API_RESOURCES)[number];

export const apiScopeFor = (resource: WiderApiResource): string => `${resource}:read`;

export const API_SCOPES = WIDER_API_RESOURCES.map(apiScopeFor);

/**
 * Scopes that read the whole account's data rather than the signed-in person's own: every API
 * scope (a new list of the wider API, such as `changes:read`, joins through WIDER_API_RESOURCES).
 * Only these roles may approve them for a partner app; other roles may approve the OpenID scopes.
 */
export const ACCOUNT_DATA_SCOPES: readonly string[] = API_SCOPES;
export const ACCOUNT_DATA_APPROVER_ROLES: readonly string[] = ['super_admin', 'admin'];
export const ALL_SCOPES = [...Object.keys(CLAIMS_BY_SCOPE), ...API_SCOPES];

/** What the consent page says each scope grants. */
export const SCOPE_DESCRIPTIONS: Record<string, string> = {
  openid: 'Know who you are',
  profile: 'Your name',
  email: 'Your email address',
  employment: 'Your role, department and job title',
  'users:read': "Read your organization's people",
  'departments:read': "Read your organization's departments",
  'locations:read': "Read your organization's locations",
  'incidents:read': "Read your organization's safety incidents",
};
