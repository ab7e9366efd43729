import { register } from 'node:module';
import { isMainThread } from 'node:worker_threads';
import {
  type Attributes,
  type Context,
  context,
  isSpanContextValid,
  propagation,
  type Span,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { type ExportResult, ExportResultCode, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { type Instrumentation, registerInstrumentations } from '@opentelemetry/instrumentation';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type ReadableSpan,
  type Sampler,
  type SpanExporter,
  type SpanProcessor,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import type { FastifyPluginCallback, FastifyRequest } from 'fastify';
import { Counter } from 'prom-client';
import type { TracingSettings } from '../config.ts';
import { REDACTED, redactUrl } from '../logging.ts';
import type { SpanAttributes, SpanHandle, SpanOptions, Tracing } from './tracing.ts';

/**
 * The OpenTelemetry SDK as this server runs it; loaded only when tracing is on (tracing.ts).
 * - Spans go through a batch processor to an OTLP/HTTP exporter (protobuf or JSON). A collector that
 *   is down, slow or frozen costs requests nothing: ending a span only queues it; an export that
 *   fails or times out drops its spans, a full queue drops new ones, and both are counted
 *   (`tracing_spans_dropped_total` in /metrics).
 * - No span carries a secret: URLs lose their query strings and credentials, key-shaped strings
 *   are replaced (`scrub`), SQL is sent without its parameters, Redis commands without arguments.
 */

const TRACER_NAME = 'safety-incident-api';

/** @fastify/otel, as used here (`loadFastifyOtel`). */
interface FastifyOtel extends Instrumentation {
  plugin(): FastifyPluginCallback;
}
type FastifyOtelClass = new (config: {
  instrumentHooks: boolean;
  instrumentHandler: boolean;
  recordExceptions: boolean;
  requestHook: (span: Span, request: FastifyRequest) => void;
}) => FastifyOtel;

/**
 * Imported by a name the type checker does not follow: its declarations widen every Fastify
 * route's `config` type (an `otel` field), which the OpenAPI document's route types do not expect.
 */
const FASTIFY_OTEL: string = '@fastify/otel';
async function loadFastifyOtel(): Promise<FastifyOtelClass> {
  return ((await import(FASTIFY_OTEL)) as { FastifyOtelInstrumentation: FastifyOtelClass })
    .FastifyOtelInstrumentation;
}

function samplerOf({ sampler, ratio }: TracingSettings): Sampler {
  const root =
    sampler === 'always_off' || sampler === 'parentbased_always_off'
      ? new AlwaysOffSampler()
      : sampler.endsWith('traceidratio')
        ? new TraceIdRatioBasedSampler(ratio)
        : new AlwaysOnSampler();
  return sampler.startsWith('parentbased_') ? new ParentBasedSampler({ root }) : root;
}

// What a span attribute must not carry: an API key (also percent-encoded), the credentials of a URL.
const API_KEY = /svc(?:_|%5f)(?:[0-9a-f]|%[0-9a-f]{2}){40}/gi;
const URL_CREDENTIALS = /\/\/[^/?#@\s]*@/g;
/** Attributes holding a URL or a path: their query string is cut off. */
const URL_ATTRIBUTES = new Set(['url.full', 'url.path', 'url.original', 'http.url', 'http.target']);
/** Attributes that are a query string: left out. */
const QUERY_ATTRIBUTES = new Set(['url.query', 'http.query']);

function scrubText(key: string, value: string): string {
  let text = URL_ATTRIBUTES.has(key) ? value.replace(/[?#].*$/s, '') : value;
  if (text.includes('svc') || text.includes('SVC')) text = text.replace(API_KEY, REDACTED);
  if (text.includes('@')) text = text.replace(URL_CREDENTIALS, '//');
  return text;
}

function scrubAttributes(attributes: Attributes): void {
  for (const key of Object.keys(attributes)) {
    if (QUERY_ATTRIBUTES.has(key)) {
      delete attributes[key];
      continue;
    }
    const value = attributes[key];
    if (typeof value === 'string') {
      const text = scrubText(key, value);
      if (text !== value) attributes[key] = text;
    }
  }
}

/** Makes a finished span safe to send, in place, before it is queued. */
function scrub(span: ReadableSpan): void {
  scrubAttributes(span.attributes);
  for (const event of span.events) if (event.attributes !== undefined) scrubAttributes(event.attributes);
  if (span.status.message !== undefined) span.status.message = scrubText('', span.status.message);
}

/**
 * The batch processor with its losses counted: spans past the queue's bound (which the batch
 * processor drops as well) and spans whose export failed. The queue's length is followed here:
 * a span is in it from its end until the batch processor hands it to the exporter (`handedOver`).
 */
class GuardedProcessor implements SpanProcessor {
  private queued = 0;
  readonly batch: BatchSpanProcessor;

  private readonly settings: TracingSettings;
  private readonly dropped: Counter<'reason'>;

  constructor(exporter: SpanExporter, settings: TracingSettings, dropped: Counter<'reason'>) {
    this.settings = settings;
    this.dropped = dropped;
    this.batch = new BatchSpanProcessor({
      exporter: new CountedExporter(exporter, this, dropped),
      maxQueueSize: settings.maxQueueSize,
      maxExportBatchSize: Math.min(512, settings.maxQueueSize),
      scheduledDelayMillis: settings.scheduleDelayMs,
      // The exporter's own deadline comes first, so its failure is the one counted.
      exportTimeoutMillis: settings.timeoutMs + 1000,
    });
  }

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    if ((span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    if (this.queued >= this.settings.maxQueueSize) {
      this.dropped.inc({ reason: 'queue_full' });
      return;
    }
    scrub(span);
    this.queued += 1;
    this.batch.onEnd(span);
  }

  handedOver(count: number): void {
    this.queued = Math.max(0, this.queued - count);
  }

  forceFlush(): Promise<void> {
    return this.batch.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.batch.shutdown();
  }
}

class CountedExporter implements SpanExporter {
  private readonly exporter: SpanExporter;
  private readonly processor: GuardedProcessor;
  private readonly dropped: Counter<'reason'>;

  constructor(exporter: SpanExporter, processor: GuardedProcessor, dropped: Counter<'reason'>) {
    this.exporter = exporter;
    this.processor = processor;
    this.dropped = dropped;
  }

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.processor.handedOver(spans.length);
    this.exporter.export(spans, (result) => {
      if (result.code !== ExportResultCode.SUCCESS)
        this.dropped.inc({ reason: 'export_failed' }, spans.length);
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.exporter.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.exporter.forceFlush?.() ?? Promise.resolve();
  }
}

function exporterOf(settings: TracingSettings): SpanExporter {
  const options = { url: settings.endpoint, headers: settings.headers, timeoutMillis: settings.timeoutMs };
  return settings.protocol === 'http/json' ? new JsonExporter(options) : new ProtobufExporter(options);
}

/** Where the request span is named and described: its route template, never its URL's query. */
function describeRequest(span: Span, request: FastifyRequest): void {
  // A request the sampler left out is not described: nothing of it is sent.
  if (!span.isRecording()) return;
  const route = request.routeOptions.url;
  span.updateName(route === undefined ? request.method : `${request.method} ${route}`);
  span.setAttribute('url.path', scrubText('url.path', redactUrl(request.url)));
}

function failed(span: Span, reason: string): void {
  span.setStatus({ code: SpanStatusCode.ERROR, message: reason });
}

/** A failure's kind and sentence: a store's or the API's message, never a stack. */
const reasonOf = (error: unknown) =>
  error instanceof Error ? `${error.name}: ${error.message}`.slice(0, 300) : 'failed';

function handleOf(span: Span): SpanHandle {
  return {
    setAttributes: (attributes) => span.setAttributes(attributes),
    fail: (reason) => failed(span, reason),
  };
}

/** What the work's result says of it; `error.type`, the semantic conventions' mark of a failure, fails the span. */
function describe(span: Span, attributes: SpanAttributes): void {
  span.setAttributes(attributes);
  const error = attributes['error.type'];
  if (error !== undefined) failed(span, String(error));
}

const NO_SPAN: SpanHandle = { setAttributes() {}, fail() {} };

export async function openTracing(settings: TracingSettings): Promise<Tracing> {
  // pg and ioredis are patched as they are imported; the hook must precede their import, which
  // it does when tracing starts before the server's modules load (bin/safety-api.js). Only those
  // two modules pass through it.
  if (isMainThread) {
    register('@opentelemetry/instrumentation/hook.mjs', import.meta.url, {
      data: { include: ['pg', 'ioredis'] },
    });
  }
  const dropped = new Counter({
    name: 'tracing_spans_dropped_total',
    help: 'Finished trace spans not sent: the export queue was full (queue_full), or the collector failed or did not answer in time (export_failed)',
    labelNames: ['reason'],
    registers: [],
  });
  // Both series exist from the start, so that a rate over them needs no first loss.
  dropped.inc({ reason: 'queue_full' }, 0);
  dropped.inc({ reason: 'export_failed' }, 0);

  const processor = new GuardedProcessor(exporterOf(settings), settings, dropped);
  const provider = new TracerProvider({
    resource: defaultResource().merge(resourceFromAttributes(settings.resource)),
    sampler: samplerOf(settings),
    spanProcessors: [processor],
  });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);

  const FastifyOtelInstrumentation = await loadFastifyOtel();
  const fastify = new FastifyOtelInstrumentation({
    // One span per request; the work inside it has spans of its own (key check, queries, …).
    instrumentHooks: false,
    instrumentHandler: false,
    recordExceptions: false,
    requestHook: describeRequest,
  });
  registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      fastify,
      new PgInstrumentation({ requireParentSpan: true, enhancedDatabaseReporting: false }),
      // The command's name only: its arguments may be keys' ids, counts, or a password (AUTH).
      new IORedisInstrumentation({ requireParentSpan: true, dbStatementSerializer: (command) => command }),
      new UndiciInstrumentation({ requireParentforSpans: true }),
    ],
  });

  const tracer = provider.getTracer(TRACER_NAME);
  /** The context a new span hangs from, or `null` when none should be made. */
  const parentFor = (root: boolean | undefined): Context | null => {
    const active = context.active();
    const parent = trace.getSpan(active);
    if (parent === undefined) return root === true ? active : null;
    // A request the sampler left out: its work is left out too (it stays in the context, for
    // propagation and the log lines' ids).
    return parent.isRecording() ? active : null;
  };

  const tracing: Tracing = {
    inSpan<T>(name: string, options: SpanOptions<Awaited<T>>, work: (span: SpanHandle) => T): T {
      const parent = parentFor(options.root);
      if (parent === null) return work(NO_SPAN);
      const span = tracer.startSpan(
        name,
        {
          kind: options.kind === 'client' ? SpanKind.CLIENT : SpanKind.INTERNAL,
          attributes: options.attributes,
        },
        parent,
      );
      let result: T;
      try {
        result = context.with(trace.setSpan(parent, span), work, undefined, handleOf(span));
      } catch (error) {
        failed(span, reasonOf(error));
        span.end();
        throw error;
      }
      if (result instanceof Promise) {
        return result.then(
          (value: unknown) => {
            if (options.describe !== undefined) describe(span, options.describe(value as Awaited<T>));
            span.end();
            return value;
          },
          (error: unknown) => {
            failed(span, reasonOf(error));
            span.end();
            throw error;
          },
        ) as T;
      }
      if (options.describe !== undefined) describe(span, options.describe(result as Awaited<T>));
      span.end();
      return result;
    },

    tracedPages<T>(
      name: string,
      attributes: SpanAttributes,
      source: AsyncGenerator<T>,
      whole: boolean,
    ): AsyncGenerator<T> {
      const parent = parentFor(false);
      if (parent === null) return source;
      async function* pages(): AsyncGenerator<T> {
        let span: Span | null = whole ? tracer.startSpan(name, { attributes }, parent ?? undefined) : null;
        let number = 0;
        try {
          for (;;) {
            if (!whole) {
              number += 1;
              span = tracer.startSpan(
                name,
                { attributes: { ...attributes, 'page.number': number } },
                parent ?? undefined,
              );
            }
            const current = span as Span;
            const step = await context.with(trace.setSpan(parent as Context, current), () => source.next());
            if (!whole) {
              if (Array.isArray(step.value)) current.setAttribute('page.items', step.value.length);
              current.end();
              span = null;
            }
            if (step.done === true) return;
            yield step.value;
          }
        } catch (error) {
          if (span !== null) failed(span, reasonOf(error));
          throw error;
        } finally {
          span?.end();
          // The walk stopped early (the client went away): the source ends too, as `for await` would.
          await source.return(undefined);
        }
      }
      return pages();
    },

    logFields(): Record<string, string> {
      const span = trace.getSpan(context.active());
      if (span === undefined) return {};
      const { traceId, spanId } = span.spanContext();
      return isSpanContextValid(span.spanContext()) ? { trace_id: traceId, span_id: spanId } : {};
    },

    async instrument(app) {
      await app.register(fastify.plugin());
    },

    droppedSpans: dropped,

    async shutdown(withinMs) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        provider.shutdown().catch(() => {}),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, withinMs);
        }),
      ]);
      clearTimeout(timer);
    },
  };
  return tracing;
}
