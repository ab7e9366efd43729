export {
  type CallOptions,
  type ClientOptions,
  createClient,
  type ExportOptions,
  SafetyClient,
  type SyncOptions,
} from './client.js';
export {
  AuthenticationError,
  type ErrorCode,
  NotFoundError,
  PermissionError,
  RateLimitError,
  SafetyApiError,
  ServiceUnavailableError,
  TimeoutError,
} from './errors.js';
export { type CachedAnswer, type EtagCache, MemoryEtagCache } from './etag-cache.js';
export { type CsvRecord, type ExportFormat, ExportStream } from './export-stream.js';
export type { components, paths, webhooks } from './generated/openapi.js';
export type { Fetch, RetryOptions } from './retry.js';
export type {
  ApiResult,
  Change,
  ChangesPage,
  Department,
  Incident,
  IncidentPagination,
  Location,
  RateLimit,
  RecordType,
  TypedRecord,
  User,
  WebhookEvent,
} from './types.js';
export { verifyWebhook, type WebhookHeaders, WebhookVerificationError } from './webhooks.js';
