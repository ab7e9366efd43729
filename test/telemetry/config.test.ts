import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { ROOT, runCli } from '../helpers.ts';

const ENDPOINT = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };

/** The one line `loadConfig` throws for `env`. */
function problem(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (error) {
    assert.ok(error instanceof ConfigError);
    assert.equal(error.message.split('\n').length, 1);
    return error.message;
  }
  assert.fail('the configuration was taken');
}

describe('tracing configuration (OTEL_*)', () => {
  test('off unless an exporter is configured', () => {
    assert.equal(loadConfig({}).tracing, null);
    assert.equal(loadConfig({ OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' }).tracing, null);
    assert.equal(loadConfig({ ...ENDPOINT, OTEL_TRACES_EXPORTER: 'none' }).tracing, null);
    assert.equal(loadConfig({ ...ENDPOINT, OTEL_SDK_DISABLED: 'true' }).tracing, null);
    // Values of a tracing that is off are not used, so they stop nothing.
    assert.equal(loadConfig({ OTEL_TRACES_SAMPLER: 'sometimes' }).tracing, null);
  });

  test('an endpoint turns it on, with the specification’s defaults', () => {
    assert.deepEqual(loadConfig(ENDPOINT).tracing, {
      endpoint: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
      headers: {},
      timeoutMs: 10_000,
      resource: { 'service.name': 'safety-incident-api' },
      sampler: 'parentbased_always_on',
      ratio: 1,
      scheduleDelayMs: 5000,
      maxQueueSize: 2048,
    });
    assert.equal(
      loadConfig({ OTEL_TRACES_EXPORTER: 'otlp' }).tracing?.endpoint,
      'http://localhost:4318/v1/traces',
    );
  });

  test('every variable is read', () => {
    const tracing = loadConfig({
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://ignored:4318',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://collector.example/custom/traces',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20abc,x-tenant=a',
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-tenant=b',
      OTEL_EXPORTER_OTLP_TIMEOUT: '3000',
      OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '2500',
      OTEL_SERVICE_NAME: 'api-eu',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=prod,service.name=overridden',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.1',
      OTEL_BSP_SCHEDULE_DELAY: '200',
      OTEL_BSP_MAX_QUEUE_SIZE: '100',
    }).tracing;
    assert.deepEqual(tracing, {
      endpoint: 'https://collector.example/custom/traces',
      protocol: 'http/json',
      headers: { authorization: 'Bearer abc', 'x-tenant': 'b' },
      timeoutMs: 2500,
      resource: { 'deployment.environment': 'prod', 'service.name': 'api-eu' },
      sampler: 'parentbased_traceidratio',
      ratio: 0.1,
      scheduleDelayMs: 200,
      maxQueueSize: 100,
    });
  });

  test('a malformed value is one line naming the variable', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ OTEL_TRACES_EXPORTER: 'jaeger' }, /OTEL_TRACES_EXPORTER must be otlp or none \(got "jaeger"\)/],
      [{ OTEL_SDK_DISABLED: 'maybe', ...ENDPOINT }, /OTEL_SDK_DISABLED must be true or false/],
      [
        { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' },
        /OTEL_EXPORTER_OTLP_ENDPOINT must start with http:\/\/ or https:\/\//,
      ],
      [
        { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'not a url' },
        /OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be a URL/,
      ],
      [
        { ...ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
        /OTEL_EXPORTER_OTLP_PROTOCOL must be http\/protobuf or http\/json \(got "grpc"\): this server exports by OTLP\/HTTP only/,
      ],
      [
        { ...ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'json' },
        /OTEL_EXPORTER_OTLP_TRACES_PROTOCOL must be http\/protobuf or http\/json/,
      ],
      [
        { ...ENDPOINT, OTEL_TRACES_SAMPLER: 'sometimes' },
        /OTEL_TRACES_SAMPLER must be one of always_on, .* \(got "sometimes"\)/,
      ],
      [
        { ...ENDPOINT, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '10%' },
        /OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1/,
      ],
      [
        { ...ENDPOINT, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '1.5' },
        /OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1/,
      ],
      [
        { ...ENDPOINT, OTEL_EXPORTER_OTLP_TIMEOUT: '10s' },
        /OTEL_EXPORTER_OTLP_TIMEOUT must be a whole number/,
      ],
      [
        { ...ENDPOINT, OTEL_BSP_MAX_QUEUE_SIZE: '0' },
        /OTEL_BSP_MAX_QUEUE_SIZE must be a whole number from 1/,
      ],
      [
        { ...ENDPOINT, OTEL_RESOURCE_ATTRIBUTES: 'team' },
        /OTEL_RESOURCE_ATTRIBUTES must be comma-separated name=value pairs/,
      ],
    ];
    for (const [env, expected] of cases) assert.match(problem(env), expected);
  });

  test('a malformed header never shows its value: it may be the collector’s credentials', () => {
    const message = problem({ ...ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%2, x=1' });
    assert.match(
      message,
      /OTEL_EXPORTER_OTLP_HEADERS must be comma-separated name=value pairs.*entry 1 of 2/,
    );
    assert.ok(!message.includes('Bearer'), message);
  });

  test('the sampler’s argument of a sampler without a ratio is not used, and stops nothing', () => {
    const tracing = loadConfig({
      ...ENDPOINT,
      OTEL_TRACES_SAMPLER: 'always_on',
      OTEL_TRACES_SAMPLER_ARG: 'x',
    }).tracing;
    assert.equal(tracing?.sampler, 'always_on');
  });

  test('serve stops at start with the one line, before anything is loaded', async () => {
    const result = await runCli(['serve'], {
      DATABASE_URL: 'sqlite::memory:',
      PORT: '0',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
      OTEL_TRACES_SAMPLER: 'traceidratio',
      OTEL_TRACES_SAMPLER_ARG: 'half',
    });
    assert.equal(result.code, 2);
    assert.equal(
      result.stderr,
      'safety-api: invalid configuration: OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, e.g. 0.1 (got "half")\n',
    );
  });
});

describe('tracing off', () => {
  test('the server’s bundle does not load OpenTelemetry unless tracing starts: only by a dynamic import', () => {
    const build = join(ROOT, 'dist/current');
    const chunks = readdirSync(build).filter((name) => name.endsWith('.js'));
    // What a chunk imports at its start (static imports), which loads whenever the chunk does.
    const staticImports = (name: string) =>
      [...readFileSync(join(build, name), 'utf8').matchAll(/^import\s[^;]*?from\s*"([^"]+)";?$/gm)].map(
        (match) => match[1] as string,
      );
    const loaded = new Set<string>();
    const visit = (name: string) => {
      if (loaded.has(name)) return;
      loaded.add(name);
      for (const target of staticImports(name)) if (target.startsWith('./')) visit(target.slice(2));
    };
    visit('cli.js');
    visit('tracing-first.js');
    assert.ok(loaded.size > 3 && loaded.size < chunks.length, [...loaded].join(', '));
    for (const name of loaded) {
      for (const target of staticImports(name))
        assert.ok(!/^@opentelemetry\/|^@fastify\/otel$/.test(target), `${name} imports ${target} at once`);
    }
    // And the SDK's chunk is there, reached by `import()` when tracing is on.
    assert.ok(chunks.some((name) => staticImports(name).includes('@opentelemetry/sdk-trace')));
  });
});
