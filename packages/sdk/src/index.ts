export {
  type CallOptions,
  type ClientOptions,
  createClient,
  type Credentials,
  type ExportOptions,
  type PageQuery,
  SafetyClient,
  type SyncOptions,
} from './client.ts';
export {
  AuthenticationError,
  type ErrorCode,
  NotFoundError,
  PermissionError,
  RateLimitError,
  SafetyApiError,
  ServiceUnavailableError,
  TimeoutError,
} from './errors.ts';
export { type CachedAnswer, type EtagCache, MemoryEtagCache } from './etag-cache.ts';
export { type CsvRecord, type ExportFormat, ExportStream } from './export-stream.ts';
export type { components, paths, webhooks } from './generated/openapi.ts';
export {
  type Authorization,
  type AuthorizationRequest,
  createOAuthClient,
  OAuthClient,
  type OAuthClientOptions,
} from './oauth.ts';
export type { Fetch, RetryOptions } from './retry.ts';
export type { ConnectionOptions } from './transport.ts';
export type {
  ApiResult,
  Change,
  ChangesPage,
  Department,
  Incident,
  IncidentPagination,
  JsonWebKeySet,
  Liveness,
  Location,
  OpenIdConfiguration,
  Page,
  Pagination,
  RateLimit,
  Readiness,
  RecordType,
  TokenSet,
  TypedRecord,
  User,
  UserInfo,
  WebhookEvent,
} from './types.ts';
export { verifyWebhook, type WebhookHeaders, WebhookVerificationError } from './webhooks.ts';
