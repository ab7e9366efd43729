export {
  type CallOptions,
  type ClientOptions,
  createClient,
  type ExportOptions,
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
export type { Fetch, RetryOptions } from './retry.ts';
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
} from './types.ts';
export { verifyWebhook, type WebhookHeaders, WebhookVerificationError } from './webhooks.ts';
