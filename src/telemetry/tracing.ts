import type { FastifyInstance } from 'fastify';
import type { Counter } from 'prom-client';
import type { TracingSettings } from '../config.ts';

/**
 * OpenTelemetry traces, behind a door that stays shut unless OTEL_* configures them
 * (`Config.tracing`). This file imports nothing of OpenTelemetry: the SDK, the exporters and the
 * instrumentations are loaded by `startTracing` with a dynamic import (sdk.ts), only when tracing
 * is on. Where the code marks a span (`inSpan`, `tracedPages`), tracing off costs one comparison
 * with `null`.
 */

export type SpanAttributes = Record<string, string | number | boolean>;

/** What the work in a span may tell it. */
export interface SpanHandle {
  setAttributes(attributes: SpanAttributes): void;
  /** Marks the span failed, with a short reason (never a secret, never a response body). */
  fail(reason: string): void;
}

export interface SpanOptions<R = unknown> {
  attributes?: SpanAttributes;
  /**
   * Attributes from the work's result (what was decided), added when it is known; an `error.type`
   * among them marks the span failed.
   */
  describe?: (result: R) => SpanAttributes;
  /** `client`: work that calls another service (a webhook delivery). Default `internal`. */
  kind?: 'internal' | 'client';
  /**
   * Whether the span may begin a trace of its own (a webhook delivery, an import). Otherwise it is
   * made only inside a traced request or job, and work outside any is not traced.
   */
  root?: boolean;
}

/** The running tracer (sdk.ts). */
export interface Tracing {
  inSpan<T>(name: string, options: SpanOptions<Awaited<T>>, work: (span: SpanHandle) => T): T;
  tracedPages<T>(
    name: string,
    attributes: SpanAttributes,
    source: AsyncGenerator<T>,
    whole: boolean,
  ): AsyncGenerator<T>;
  /** The `trace_id` and `span_id` of the active span, for every log line (pino's `mixin`). */
  logFields(): Record<string, string>;
  /** The request spans (@fastify/otel): registered first, before any hook or route. */
  instrument(app: FastifyInstance): Promise<void>;
  /** Spans lost: the queue full, or an export that failed (collector down, slow, refusing). */
  droppedSpans: Counter<'reason'>;
  /** Sends what is queued (within `withinMs`) and stops. */
  shutdown(withinMs: number): Promise<void>;
}

let active: Tracing | null = null;
let starting: Promise<Tracing> | null = null;

/** The tracer of this thread, or `null` when tracing is off. */
export function activeTracing(): Tracing | null {
  return active;
}

/**
 * Loads the OpenTelemetry SDK and starts tracing, once per thread. Started before the stores'
 * clients are loaded (bin/safety-api.js, for `serve`), it also instruments pg and ioredis.
 */
export function startTracing(settings: TracingSettings): Promise<Tracing> {
  starting ??= import('./sdk.ts').then(async ({ openTracing }) => {
    active = await openTracing(settings);
    return active;
  });
  return starting;
}

/**
 * Runs `work` in a span named `name`, a child of the active one; without tracing (or, unless
 * `root`, outside any traced work), just runs it. A throw or a rejection fails the span.
 */
export function inSpan<T>(name: string, options: SpanOptions<Awaited<T>>, work: (span: SpanHandle) => T): T {
  return active === null ? work(NO_SPAN) : active.inSpan(name, options, work);
}

/**
 * `source` with a span for each item it yields (each page read), children of the span active
 * now; `whole`: one span for the whole walk instead. Without tracing, `source` itself.
 */
export function tracedPages<T>(
  name: string,
  attributes: SpanAttributes,
  source: AsyncGenerator<T>,
  { whole = false }: { whole?: boolean } = {},
): AsyncGenerator<T> {
  return active === null ? source : active.tracedPages(name, attributes, source, whole);
}

const NO_SPAN: SpanHandle = { setAttributes() {}, fail() {} };
