import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { DEPLOYMENT, TRACING_MARKERS, tracingTable, withTable } from '../scripts/config-table.ts';
import { CONFIG_VARIABLES, ConfigError, loadConfig, TRACING, type TracingVariable } from '../src/config.ts';

/** The one line `loadConfig` throws for `env`. */
function problem(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (error) {
    assert.ok(error instanceof ConfigError);
    return error.message;
  }
  assert.fail('the configuration was taken');
}

const ENDPOINT = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };

describe("OpenTelemetry's variables, declared once (TRACING in src/config.ts)", () => {
  test("docs/deployment.md's tracing table is the one the declarations write (npm run docs:config)", () => {
    const deployment = readFileSync(DEPLOYMENT, 'utf8');
    assert.equal(withTable(deployment, tracingTable(), TRACING_MARKERS), deployment);
    for (const { names } of Object.values(TRACING)) {
      for (const name of names) assert.match(deployment, new RegExp(`\\| (\`\\w+\`, )?\`${name}\``), name);
    }
  });

  test('every one is a variable the loader reads', () => {
    for (const { names } of Object.values(TRACING))
      for (const name of names) assert.ok(CONFIG_VARIABLES.includes(name), name);
  });

  test('their defaults are what tracing takes when they are unset', () => {
    const tracing = loadConfig({ OTEL_TRACES_EXPORTER: 'otlp' }).tracing;
    assert.deepEqual(tracing, {
      endpoint: `${TRACING.endpoint.default}/v1/traces`,
      protocol: TRACING.protocol.default,
      headers: {},
      timeoutMs: Number(TRACING.timeoutMs.default),
      resource: { 'service.name': TRACING.serviceName.default },
      sampler: TRACING.sampler.default,
      ratio: Number(TRACING.ratio.default),
      scheduleDelayMs: Number(TRACING.scheduleDelayMs.default),
      maxQueueSize: Number(TRACING.maxQueueSize.default),
    });
  });

  test('whole numbers are held to their declared bounds, under each of their names', () => {
    let checked = 0;
    for (const variable of Object.values(TRACING)) {
      const { names, reading }: TracingVariable = variable;
      if (reading.kind !== 'whole') continue;
      checked += 1;
      for (const name of names) {
        assert.doesNotThrow(() => loadConfig({ ...ENDPOINT, [name]: String(reading.max) }), name);
        assert.doesNotThrow(() => loadConfig({ ...ENDPOINT, [name]: String(reading.min) }), name);
        assert.match(
          problem({ ...ENDPOINT, [name]: String(reading.max + 1) }),
          new RegExp(
            `^invalid configuration: ${name} must be a whole number from ${reading.min} to ${reading.max}, `,
          ),
        );
      }
    }
    assert.equal(checked, 3, "the export's timeout and the batch processor's two settings");
  });

  test('of a pair, the …_TRACES_… form wins, and a problem names the one that was read', () => {
    const tracing = loadConfig({
      ...ENDPOINT,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: ' http/protobuf ',
      OTEL_EXPORTER_OTLP_TIMEOUT: 'not read',
      OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '2500',
    }).tracing;
    assert.equal(tracing?.protocol, 'http/protobuf');
    assert.equal(tracing?.timeoutMs, 2500);
    assert.equal(
      problem({ ...ENDPOINT, OTEL_EXPORTER_OTLP_TIMEOUT: '3000', OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '0' }),
      'invalid configuration: OTEL_EXPORTER_OTLP_TRACES_TIMEOUT must be a whole number from 1 to 600000, e.g. 10000 (got "0")',
    );
    // Blank is a value of the protocol (and a wrong one), as before: only spaces around it do not count.
    assert.equal(
      problem({ ...ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: ' ' }),
      'invalid configuration: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL must be http/protobuf or http/json (got " ")',
    );
  });
});

describe('rules between variables', () => {
  test('a variable a rule refuses is not read as well: one problem for it', () => {
    assert.equal(
      problem({ MIGRATION_DATABASE_URL: 'mysql://db/safety' }),
      'invalid configuration: MIGRATION_DATABASE_URL is for PostgreSQL only: DATABASE_URL is a SQLite file',
    );
    assert.equal(
      problem({ METRICS_HOST: '0.0.0.0', PORT: 'x' }),
      'invalid configuration: PORT must be an integer from 0 to 65535 (got "x"); METRICS_HOST needs METRICS_PORT: without it /metrics is served on the main port',
    );
  });

  test("problems come in the order of the variables, a rule's beside its variable", () => {
    assert.equal(
      problem({ CACHE_MAX_MB: '7', WEBHOOK_LEASE_SECONDS: '10', METRICS_PORT: '8080', LOG_LEVEL: 'loud' }),
      'invalid configuration: METRICS_PORT must differ from PORT (both are 8080); ' +
        'LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent (got "loud"); ' +
        'WEBHOOK_LEASE_SECONDS must be at least twice WEBHOOK_TIMEOUT_MS (10 s against 10000 ms); ' +
        'CACHE_MAX_MB must be a number of MiB from 8 to 65536, e.g. 64 (got "7")',
    );
  });

  test('a default that names another variable takes its value', () => {
    const config = loadConfig({ PORT: '9000', DATABASE_URL: 'postgres://u@db:5432/safety' });
    assert.equal(config.baseUrl, 'http://localhost:9000');
    assert.equal(config.migrationDatabaseUrl, 'postgres://u@db:5432/safety');
  });

  test('mail: off unless SMTP_URL is set; the sender defaults to the host of BASE_URL', () => {
    assert.equal(loadConfig({}).smtpUrl, null);
    const config = loadConfig({ BASE_URL: 'https://safety.example.com', SMTP_URL: 'smtp://u:p@mail:587' });
    assert.equal(config.smtpUrl, 'smtp://u:p@mail:587');
    assert.equal(config.mailFrom, 'safety-api@safety.example.com');
    assert.equal(loadConfig({ MAIL_FROM: 'Safety <ops@example.com>' }).mailFrom, 'Safety <ops@example.com>');
  });

  test('a bad SMTP_URL is refused without showing its password', () => {
    const message = problem({ SMTP_URL: 'http://mailer:hunter2@mail.example.com' });
    assert.equal(
      message,
      'invalid configuration: SMTP_URL must be smtp://[user:password@]host[:port] or smtps://… (the value is not shown: it may hold a password)',
    );
  });
});
